//! Host PCI addresses as Proxmox VE writes them (`[domain:]bus:device[.function]`): what the
//! controller's placement and the simulator's reservation both compare.

/// `0000:01:00.0` for `01:00.0` (lower case); a device without its function stays without.
pub fn full(address: &str) -> String {
    let address = address.to_ascii_lowercase();
    if address.matches(':').count() == 1 {
        format!("0000:{address}")
    } else {
        address
    }
}

/// Whether `wanted` names `present`: the same function, or `present` is a function of the
/// device `wanted` names without one (`01:00` is every function of 01:00).
pub fn covers(wanted: &str, present: &str) -> bool {
    let (wanted, present) = (full(wanted), full(present));
    wanted == present
        || (!wanted.contains('.')
            && present
                .strip_prefix(wanted.as_str())
                .is_some_and(|function| function.starts_with('.')))
}

/// Whether two addresses name a common function.
pub fn overlap(a: &str, b: &str) -> bool {
    covers(a, b) || covers(b, a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_covers_its_functions() {
        assert_eq!(full("01:00.0"), "0000:01:00.0");
        assert!(covers("01:00", "0000:01:00.1"));
        assert!(!covers("0000:01:00.1", "01:00"));
        assert!(overlap("0000:01:00.1", "01:00"));
        assert!(!overlap("01:00.0", "01:00.1"));
        assert!(!covers("01:0", "0000:01:00.0"));
    }
}
