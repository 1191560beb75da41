//! Admission of `spec.disks.additionalVolumes`: drives Proxmox has and that are free for
//! a data disk, options the bus supports, and on updates of a machine whose VM exists,
//! volumes that only grow.

use serde_json::{Value, json};

use super::support::Edit::{Remove, Set};
use super::support::{case, machine_template_v2, machine_v2, run_create_cases, run_update_cases};

fn with_volumes(volumes: Value) -> Value {
    let mut machine = machine_v2();
    machine["spec"]["disks"]["additionalVolumes"] = volumes;
    machine
}

fn data_machine() -> Value {
    with_volumes(json!([
        {"disk": "scsi1", "sizeGb": 20, "storage": "ceph", "discard": true},
        {"disk": "virtio0", "sizeGb": 5, "ioThread": true}
    ]))
}

/// The data machine once its VM exists.
fn provisioned_data_machine() -> Value {
    let mut machine = data_machine();
    machine["spec"]["virtualMachineID"] = json!(120);
    machine
}

#[test]
fn volumes_on_free_drives_with_options_their_bus_supports() {
    run_create_cases(vec![
        case("two data disks", data_machine, vec![], vec![]),
        case(
            "a drive past its bus's last slot",
            data_machine,
            vec![Set("/spec/disks/additionalVolumes/0/disk", json!("scsi31"))],
            vec![
                r#"spec.disks.additionalVolumes[0].disk: Invalid value: "scsi31": no such drive: slots are 0-3 on ide, 0-5 on sata, 0-30 on scsi and 0-15 on virtio"#,
            ],
        ),
        case(
            "a bus Proxmox does not have",
            data_machine,
            vec![Set("/spec/disks/additionalVolumes/0/disk", json!("nvme0"))],
            vec![
                r#"spec.disks.additionalVolumes[0].disk: Invalid value: "nvme0": spec.disks.additionalVolumes[0].disk in body should match '^(ide|sata|scsi|virtio)[0-9]{1,2}$'"#,
            ],
        ),
        case(
            "the boot volume's drive",
            data_machine,
            vec![Set("/spec/disks/additionalVolumes/0/disk", json!("scsi0"))],
            vec![
                r#"spec.disks.additionalVolumes[0].disk: Invalid value: "scsi0": this is the boot volume (disks.bootVolume)"#,
            ],
        ),
        case(
            "the seed's drive",
            data_machine,
            vec![Set("/spec/disks/additionalVolumes/0/disk", json!("ide0"))],
            vec![
                r#"spec.disks.additionalVolumes[0].disk: Invalid value: "ide0": the bootstrap seed's CD-ROM is on this drive (cloudInitDrive)"#,
            ],
        ),
        case(
            "one drive twice",
            data_machine,
            vec![Set("/spec/disks/additionalVolumes/1/disk", json!("scsi1"))],
            vec![r#"spec.disks.additionalVolumes[1]: Duplicate value: {"disk":"scsi1"}"#],
        ),
        case(
            "an SSD on virtio and an I/O thread on sata",
            data_machine,
            vec![
                Set("/spec/disks/additionalVolumes/1/ssd", json!(true)),
                Set("/spec/disks/additionalVolumes/0/disk", json!("sata1")),
                Set("/spec/disks/additionalVolumes/0/ioThread", json!(true)),
            ],
            vec![
                "spec.disks.additionalVolumes[0].ioThread: Invalid value: true: I/O threads need a scsi or virtio drive",
                "spec.disks.additionalVolumes[1].ssd: Invalid value: true: virtio drives cannot be presented as SSDs: use a scsi or sata drive",
            ],
        ),
        case(
            "no size, an unknown format",
            data_machine,
            vec![
                Remove("/spec/disks/additionalVolumes/0/sizeGb"),
                Set("/spec/disks/additionalVolumes/1/format", json!("vhd")),
            ],
            vec![
                "spec.disks.additionalVolumes[0].sizeGb: Required value",
                r#"spec.disks.additionalVolumes[1].format: Unsupported value: "vhd": supported values: "raw", "qcow2", "vmdk""#,
                "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ],
        ),
        case(
            "a template's machines get the same rules",
            machine_template_v2,
            vec![Set(
                "/spec/template/spec/disks/additionalVolumes",
                json!([{"disk": "scsi0", "sizeGb": 1}]),
            )],
            vec![
                r#"spec.template.spec.disks.additionalVolumes[0].disk: Invalid value: "scsi0": this is the boot volume (disks.bootVolume)"#,
            ],
        ),
    ]);
}

#[test]
fn volumes_of_an_existing_vm_only_grow() {
    run_update_cases(vec![
        case(
            "grown, and one added",
            provisioned_data_machine,
            vec![
                Set("/spec/disks/additionalVolumes/0/sizeGb", json!(40)),
                Set(
                    "/spec/disks/additionalVolumes/2",
                    json!({"disk": "sata1", "sizeGb": 1}),
                ),
            ],
            vec![],
        ),
        case(
            "shrunk",
            provisioned_data_machine,
            vec![Set("/spec/disks/additionalVolumes/0/sizeGb", json!(10))],
            vec![
                "spec.disks.additionalVolumes[0].sizeGb: Invalid value: 10: volumes cannot shrink (was 20): Proxmox VE only grows disks",
            ],
        ),
        case(
            "removed",
            provisioned_data_machine,
            vec![Remove("/spec/disks/additionalVolumes/1")],
            vec![
                "spec.disks.additionalVolumes: Forbidden: virtio0 cannot be removed once the VM exists: its disk holds data and is never detached; replace the machine instead",
            ],
        ),
        case(
            "moved to another storage",
            provisioned_data_machine,
            vec![Set(
                "/spec/disks/additionalVolumes/0/storage",
                json!("local-lvm"),
            )],
            vec![
                "spec.disks.additionalVolumes[0]: Forbidden: only sizeGb of a volume can change once the VM exists",
            ],
        ),
        case(
            "before the VM exists anything goes",
            data_machine,
            vec![
                Set("/spec/disks/additionalVolumes/0/sizeGb", json!(1)),
                Remove("/spec/disks/additionalVolumes/1"),
            ],
            vec![],
        ),
    ]);
}
