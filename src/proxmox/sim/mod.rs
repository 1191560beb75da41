//! Proxmox VE simulator.
