//! Proptest strategies over registry commands and records.

use bytes::Bytes;
use paros_core::ids::{NodeId, TenantId};
use paros_registry::{Command, KeyId, KeyScope, Quotas, Role, Standing, TenantStatus, TokenId};
use proptest::prelude::*;

use super::*;

/// A command drawn from a small universe, so that names, ids and voters collide often and
/// every refusal rule gets exercised.
pub fn command() -> impl Strategy<Value = Command> {
    let names = ["a", "b", "c", "d"];
    let tiers = ["default", "gold", "silver"];
    prop_oneof![
        1 => Just(init_cell(vec![member(1, "a"), member(2, "b"), member(3, "c")])),
        2 => (4u64..8, 0usize..3, prop::sample::select(vec!["a", "b", "c"]))
            .prop_map(|(id, role, z)| register(id, [Role::Node, Role::Replica, Role::Gateway][role], z)),
        1 => (1u64..8, 0usize..3).prop_map(|(m, s)| Command::SetStanding {
            machine: NodeId(m),
            standing: [Standing::Registered, Standing::Draining, Standing::Retired][s],
        }),
        3 => (100u64..104, prop::sample::select(names.to_vec()))
            .prop_map(|(t, n)| sign_up(t, n)),
        1 => (100u64..104, any::<bool>()).prop_map(|(t, s)| Command::SetTenantStatus {
            tenant: TenantId(t),
            status: if s { TenantStatus::Active } else { TenantStatus::Suspended },
        }),
        1 => (100u64..104, 0u32..4).prop_map(|(t, j)| Command::SetQuotas {
            tenant: TenantId(t),
            quotas: Quotas { journals_max: j, ..Quotas::default() },
        }),
        1 => (0usize..3, 0u8..4).prop_map(|(s, k)| Command::AddSigningKey {
            scope: if s == 0 { KeyScope::Cell } else { KeyScope::Tenant(TenantId(99 + s as u64)) },
            kid: KeyId::new(format!("k{k}")).expect("valid"),
            public_key: Bytes::from(vec![k; 32]),
        }),
        1 => (0u8..4).prop_map(|k| Command::RetireSigningKey { kid: KeyId::new(format!("k{k}")).expect("valid") }),
        1 => (100u64..104, 0u8..4).prop_map(|(t, j)| Command::RevokeToken {
            tenant: TenantId(t),
            jti: TokenId::new(format!("t{j}")).expect("valid"),
        }),
        4 => (100u64..104, 0u64..8, prop::sample::select(names.to_vec()), prop::collection::vec(1u64..8, 1..4))
            .prop_map(|(t, j, n, v)| create(t, j, n, &v)),
        2 => (100u64..104, prop::sample::select(names.to_vec())).prop_map(|(t, n)| delete(t, n)),
        // Tiers: feeds collide with machine ids and with each other; journals land on them.
        2 => (prop::sample::select(tiers.to_vec()), 6u64..12).prop_map(|(t, f)| create_tier(t, f)),
        2 => (4u64..12, prop::sample::select(tiers.to_vec()), prop::sample::select(vec!["a", "b", "c"]))
            .prop_map(|(id, t, z)| register_replica(id, t, z)),
        3 => (
            100u64..104,
            0u64..8,
            prop::sample::select(names.to_vec()),
            prop::collection::vec(1u64..8, 1..4),
            prop::sample::select(tiers.to_vec()),
        )
            .prop_map(|(t, j, n, v, tier)| create_on(t, j, n, &v, tier)),
        // Issue 34: incarnations collide, old identities rejoin, seats move and complete.
        2 => (1u64..12, 0usize..3, prop::sample::select(vec!["a", "b", "c"]), 1u64..4)
            .prop_map(|(id, role, z, i)| admit(id, [Role::Node, Role::Replica, Role::Gateway][role], z, i)),
        1 => (1u64..8, 4u64..12, prop::sample::select(vec!["a", "b", "c"]), 1u64..4)
            .prop_map(|(old, new, z, i)| rejoin(old, new, z, i)),
        3 => (100u64..104, 0u64..8, 1u64..8, 1u64..10).prop_map(|(t, j, from, to)| move_seat(t, j, from, to)),
        2 => (100u64..104, 0u64..8, 0u64..3).prop_map(|(t, j, e)| move_done(t, j, e)),
    ]
}

/// Records: mostly commands under ids that repeat now and then, sometimes garbage.
pub fn records() -> impl Strategy<Value = Vec<Bytes>> {
    let record = prop_oneof![
        12 => (0u128..40, command()).prop_map(|(id, c)| encode(id, c)),
        1 => prop::collection::vec(any::<u8>(), 0..12).prop_map(Bytes::from),
    ];
    // Most sequences form the cell first, so that later commands are judged on their merits.
    (any::<bool>(), prop::collection::vec(record, 0..60)).prop_map(|(formed, mut records)| {
        if formed {
            records.insert(0, encode(1000, init_cell(vec![member(1, "a"), member(2, "b"), member(3, "c")])));
        }
        records
    })
}
