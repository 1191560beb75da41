//! Lists convert item by item; going up, each item is given the stored item
//! of the same namespace and name (wherever it is in the stored list).

use capmox_apiserver::api::conversion::Spoke;
use capmox_apiserver::api::{v1alpha1, v1alpha2};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use proptest::collection::vec;
use proptest::prelude::*;

use super::generate::hub;

macro_rules! list_round_trip {
    ($test:ident, $list:ident, $items:expr) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1_000))]

            #[test]
            fn $test(items in vec($items, 0..=3)) {
                let stored = v2_list(v1alpha2::$list {
                    metadata: ListMeta {
                        resource_version: Some("42".into()),
                        ..ListMeta::default()
                    },
                    items,
                    ..v1alpha2::$list::default()
                });
                let seen = v1alpha1::$list::from_hub(&stored).expect("converts down");
                prop_assert_eq!(seen.kind.as_str(), stringify!($list));
                prop_assert_eq!(seen.items.len(), stored.items.len());

                // The stored list in another order: items still find theirs.
                let mut shuffled = stored.clone();
                shuffled.items.reverse();
                let written = seen.to_hub(Some(&shuffled)).expect("converts up");
                prop_assert_eq!(written, stored);
            }
        }
    };
}

/// Gives items distinct names (the server lists unique objects) and sets the
/// list's type metadata as conversion does.
fn v2_list<L: HubList>(mut list: L) -> L {
    list.name_items_uniquely();
    list
}

trait HubList {
    fn name_items_uniquely(&mut self);
}

macro_rules! hub_list {
    ($list:ident) => {
        impl HubList for v1alpha2::$list {
            fn name_items_uniquely(&mut self) {
                self.api_version = "infrastructure.cluster.x-k8s.io/v1alpha2".into();
                self.kind = stringify!($list).into();
                for (i, item) in self.items.iter_mut().enumerate() {
                    item.metadata.name = Some(format!("item-{i}"));
                }
            }
        }
    };
}

hub_list!(ProxmoxClusterList);
hub_list!(ProxmoxClusterTemplateList);
hub_list!(ProxmoxMachineList);
hub_list!(ProxmoxMachineTemplateList);

list_round_trip!(cluster_list_round_trips, ProxmoxClusterList, hub::cluster());
list_round_trip!(
    cluster_template_list_round_trips,
    ProxmoxClusterTemplateList,
    hub::cluster_template()
);
list_round_trip!(machine_list_round_trips, ProxmoxMachineList, hub::machine());
list_round_trip!(
    machine_template_list_round_trips,
    ProxmoxMachineTemplateList,
    hub::machine_template()
);
