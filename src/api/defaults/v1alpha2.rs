//! v1alpha2 defaults that a schema `default` cannot express.

use serde_json::Value;

use crate::api::Kind;

/// Where a kind's network devices are.
fn devices_pointer(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::ProxmoxMachine => Some("/spec/network/networkDevices"),
        Kind::ProxmoxMachineTemplate => Some("/spec/template/spec/network/networkDevices"),
        Kind::ProxmoxCluster | Kind::ProxmoxClusterTemplate | Kind::ProxmoxKubernetesRelease => {
            None
        }
    }
}

fn is_unnamed(device: &Value) -> bool {
    device
        .as_object()
        .is_some_and(|d| d.get("name").is_none_or(Value::is_null))
}

/// Whether some network device of `object` has no name yet.
pub fn has_unnamed_devices(kind: Kind, object: &Value) -> bool {
    devices_pointer(kind)
        .and_then(|p| object.pointer(p))
        .and_then(Value::as_array)
        .is_some_and(|devices| devices.iter().any(is_unnamed))
}

/// Names every network device without a name after its position in
/// `networkDevices`: the first is `net0`, the second `net1`, and so on.
/// (Upstream's schema defaults every missing name to `net0`, which makes a
/// second unnamed device a duplicate.)
pub fn name_devices_by_position(kind: Kind, object: &mut Value) {
    let Some(Value::Array(devices)) = devices_pointer(kind).and_then(|p| object.pointer_mut(p))
    else {
        return;
    };
    for (position, device) in devices.iter_mut().enumerate() {
        if is_unnamed(device)
            && let Value::Object(device) = device
        {
            device.insert("name".into(), Value::String(format!("net{position}")));
        }
    }
}
