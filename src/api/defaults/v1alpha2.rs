//! v1alpha2 defaults that a schema `default` cannot express.

use serde_json::Value;

use crate::api::Kind;

/// Names every network device without a name after its position in
/// `networkDevices`: the first is `net0`, the second `net1`, and so on.
/// (Upstream's schema defaults every missing name to `net0`, which makes a
/// second unnamed device a duplicate.)
pub fn name_devices_by_position(kind: Kind, object: &mut Value) {
    let spec = match kind {
        Kind::ProxmoxMachine => object.pointer_mut("/spec"),
        Kind::ProxmoxMachineTemplate => object.pointer_mut("/spec/template/spec"),
        Kind::ProxmoxCluster | Kind::ProxmoxClusterTemplate => None,
    };
    let Some(Value::Array(devices)) = spec.and_then(|s| s.pointer_mut("/network/networkDevices"))
    else {
        return;
    };
    for (position, device) in devices.iter_mut().enumerate() {
        if let Value::Object(device) = device {
            let name = device.entry("name").or_insert(Value::Null);
            if name.is_null() {
                *name = Value::String(format!("net{position}"));
            }
        }
    }
}
