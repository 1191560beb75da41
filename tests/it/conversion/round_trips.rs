//! Round trips for each kind:
//! - a stored object read as v1alpha1 and written back unchanged is the
//!   stored object again;
//! - a new v1alpha1 object reads back as written (see `generate::spoke` for
//!   the inputs left out, and why);
//! - whatever is stored, a v1alpha1 write reads back as written.

use capmox_apiserver::api::conversion::Spoke;
use capmox_apiserver::api::{v1alpha1, v1alpha2};
use proptest::prelude::*;

use super::CASES;
use super::generate::{hub, spoke};

macro_rules! round_trips {
    ($module:ident, $kind:ident, $hub:expr, $spoke:expr, $read_back:expr) => {
        mod $module {
            use super::*;

            /// What a read-back v1alpha1 object is compared as.
            fn read_back(object: v1alpha1::$kind) -> v1alpha1::$kind {
                let normalize: fn(v1alpha1::$kind) -> v1alpha1::$kind = $read_back;
                normalize(object)
            }

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(CASES))]

                #[test]
                fn stored_object_survives_a_v1alpha1_read_modify_write(stored in $hub) {
                    let seen = v1alpha1::$kind::from_hub(&stored).expect("in-range objects convert down");
                    let written = seen.to_hub(Some(&stored)).expect("converts up");
                    prop_assert_eq!(written, stored);
                }

                #[test]
                fn new_v1alpha1_object_reads_back_as_written(object in $spoke) {
                    let stored: v1alpha2::$kind = object.clone().to_hub(None).expect("converts up");
                    let seen = v1alpha1::$kind::from_hub(&stored).expect("converts down");
                    prop_assert_eq!(read_back(seen), object);
                }

                #[test]
                fn v1alpha1_write_reads_back_as_written_whatever_is_stored(
                    object in $spoke,
                    stored in $hub,
                ) {
                    let written = object.clone().to_hub(Some(&stored)).expect("converts up");
                    let seen = v1alpha1::$kind::from_hub(&written).expect("converts down");
                    prop_assert_eq!(read_back(seen), object);
                }
            }
        }
    };
}

round_trips!(
    cluster,
    ProxmoxCluster,
    hub::cluster(),
    spoke::cluster(),
    |o| o
);
round_trips!(
    cluster_template,
    ProxmoxClusterTemplate,
    hub::cluster_template(),
    spoke::cluster_template(),
    |mut o| {
        // Every template shows the compatibility placeholder (see examples).
        o.spec.template.spec.clone_spec = None;
        o
    }
);
round_trips!(
    machine,
    ProxmoxMachine,
    hub::machine(),
    spoke::machine(),
    |o| o
);
round_trips!(
    machine_template,
    ProxmoxMachineTemplate,
    hub::machine_template(),
    spoke::machine_template(),
    |o| o
);
