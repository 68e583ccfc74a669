//! Tokens: forged, expired, `alg: none`, HS256-confused, tampered and revoked tokens are 401;
//! scopes and journal restrictions are 403; tenants never see each other's journals.

mod common;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use paros_api::Scope;
use paros_gateway::{KeyPair, auth};
use paros_registry::KeyId;
use serde_json::json;

use common::{call, code, create, mint, signup, world};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_are_unauthorized_and_a_revoked_one_within_a_second() {
    let w = world().await;
    let r = &w.router;
    let (tenant, owner, owner_jti) = signup(r, "acme").await;
    create(r, &owner, "orders", None).await;
    let tenant_id = paros_core::TenantId(u64::from_str_radix(&tenant, 16).unwrap());
    let list = |t: String| async move { call(r, "GET", "/v1/journals", Some(&t), None).await };

    assert_eq!(list(owner.clone()).await.0, StatusCode::OK);
    let (s, v) = call(r, "GET", "/v1/journals", None, None).await;
    assert_eq!((s, code(&v)), (StatusCode::UNAUTHORIZED, "unauthorized"), "no token");
    assert_eq!(list("not-a-jwt".into()).await.0, StatusCode::UNAUTHORIZED);

    // Expired: exp two seconds ago (past the 1 s leeway).
    let exp = auth::now_s() - 2;
    let (expired, _) = auth::mint_tenant_token(&w.key, tenant_id, Scope::Owner, None, exp);
    assert_eq!(list(expired).await.0, StatusCode::UNAUTHORIZED, "expired");

    // Forged: signed by another key under the same kid.
    let other = KeyPair::generate(KeyId::new("k1").unwrap());
    let (forged, _) = auth::mint_tenant_token(&other, tenant_id, Scope::Owner, None, auth::now_s() + 600);
    assert_eq!(list(forged).await.0, StatusCode::UNAUTHORIZED, "forged");
    // A kid the registry never recorded.
    let stranger = KeyPair::generate(KeyId::new("k9").unwrap());
    let (unknown_kid, _) = auth::mint_tenant_token(&stranger, tenant_id, Scope::Owner, None, auth::now_s() + 600);
    assert_eq!(list(unknown_kid).await.0, StatusCode::UNAUTHORIZED, "unknown kid");

    // alg: none, with the real claims.
    let payload = owner.split('.').nth(1).unwrap();
    let none_header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT","kid":"k1"}"#);
    assert_eq!(list(format!("{none_header}.{payload}.")).await.0, StatusCode::UNAUTHORIZED, "alg none");

    // HS256 keyed with the public key (algorithm confusion).
    let claims: serde_json::Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some("k1".into());
    let hs = jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(w.key.public_key().as_slice()).unwrap(),
    )
    .unwrap();
    assert_eq!(list(hs).await.0, StatusCode::UNAUTHORIZED, "HS256");

    // Tampered: a read token's payload rewritten to owner, the signature kept.
    let (s, v) = mint(r, &owner, json!({"scope": "read"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let read = v["token"].as_str().unwrap().to_owned();
    let parts: Vec<&str> = read.split('.').collect();
    let mut c: serde_json::Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    c["scope"] = json!("owner");
    let tampered = format!("{}.{}.{}", parts[0], URL_SAFE_NO_PAD.encode(serde_json::to_vec(&c).unwrap()), parts[2]);
    assert_eq!(list(tampered).await.0, StatusCode::UNAUTHORIZED, "tampered");

    // Scopes: a read token may list but not create, write or mint.
    assert_eq!(list(read.clone()).await.0, StatusCode::OK);
    let (s, v) = call(r, "POST", "/v1/journals", Some(&read), Some(json!({"name": "x"}))).await;
    assert_eq!((s, code(&v)), (StatusCode::FORBIDDEN, "forbidden"));
    let (s, _) = call(
        r,
        "POST",
        "/v1/journals/orders/leader",
        Some(&read),
        Some(json!({"new": "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b", "old": null})),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(mint(r, &read, json!({"scope": "read"})).await.0, StatusCode::FORBIDDEN);
    // A minted token never exceeds its parent.
    let (s, v) = mint(r, &owner, json!({"scope": "write", "expires_in_s": 100_000_000})).await;
    assert_eq!((s, code(&v)), (StatusCode::FORBIDDEN, "forbidden"), "longer than the parent");
    let (s, v) = mint(r, &owner, json!({"scope": "admin"})).await;
    assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "malformed"));
    let (s, v) = mint(r, &owner, json!({"scope": "write", "expires_in_s": 60})).await;
    assert_eq!(s, StatusCode::OK);
    let write = v["token"].as_str().unwrap().to_owned();
    let (s, v) = mint(r, &write, json!({"scope": "read"})).await;
    assert_eq!((s, code(&v)), (StatusCode::FORBIDDEN, "forbidden"), "only owner mints: {v}");

    // Revocation: refused within a second; again is 204; an id never minted is 404.
    let (s, v) = mint(r, &owner, json!({"scope": "read"})).await;
    assert_eq!(s, StatusCode::OK);
    let doomed = v["token"].as_str().unwrap().to_owned();
    let doomed_id = v["token_id"].as_str().unwrap().to_owned();
    assert_eq!(list(doomed.clone()).await.0, StatusCode::OK);
    let (s, _) = call(r, "DELETE", &format!("/v1/tokens/{doomed_id}"), Some(&owner), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let revoked_at = Instant::now();
    loop {
        if list(doomed.clone()).await.0 == StatusCode::UNAUTHORIZED {
            break;
        }
        assert!(revoked_at.elapsed() < Duration::from_secs(1), "a revoked token is refused within 1 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (s, _) = call(r, "DELETE", &format!("/v1/tokens/{doomed_id}"), Some(&owner), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT, "revoking again");
    let (s, v) = call(r, "DELETE", "/v1/tokens/tNEVERMINTED.abc", Some(&owner), None).await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "unknown_token"));
    // Another tenant's token id is unknown here.
    let (_, other_owner, other_jti) = signup(r, "globex").await;
    let (s, v) = call(r, "DELETE", &format!("/v1/tokens/{other_jti}"), Some(&owner), None).await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "unknown_token"));
    // The signup token may be revoked too.
    let (s, _) = call(r, "DELETE", &format!("/v1/tokens/{owner_jti}"), Some(&owner), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert_eq!(list(owner).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(list(other_owner).await.0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_are_isolated_and_a_restricted_token_stays_in_its_journal() {
    let w = world().await;
    let r = &w.router;
    let (_, a, _) = signup(r, "tenant-a").await;
    let (_, b, _) = signup(r, "tenant-b").await;
    create(r, &a, "orders", None).await;
    create(r, &a, "audit", None).await;
    create(r, &b, "secret", None).await;

    // A cannot name B's journal: it does not exist in A's tenant.
    let (s, v) = call(r, "GET", "/v1/journals/secret", Some(&a), None).await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "unknown_journal"));
    let (s, v) = call(r, "GET", "/v1/journals/secret/records?from=0", Some(&a), None).await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "unknown_journal"));
    // The same name in both tenants is two journals.
    create(r, &b, "orders", None).await;
    let (s, v) = call(r, "GET", "/v1/journals", Some(&b), None).await;
    assert_eq!(s, StatusCode::OK);
    let names: Vec<&str> = v["journals"].as_array().unwrap().iter().map(|j| j["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 2);
    assert!(names.contains(&"secret") && names.contains(&"orders"));

    // A journal-restricted token: its journal only; another is 403 whether it exists or not.
    let (s, v) = mint(r, &a, json!({"scope": "write", "journal": "orders"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let only = v["token"].as_str().unwrap().to_owned();
    let (s, _) = call(r, "GET", "/v1/journals/orders", Some(&only), None).await;
    assert_eq!(s, StatusCode::OK);
    for other in ["audit", "nonexistent", "secret"] {
        let (s, v) = call(r, "GET", &format!("/v1/journals/{other}/records?from=0"), Some(&only), None).await;
        assert_eq!((s, code(&v)), (StatusCode::FORBIDDEN, "forbidden"), "{other}");
    }
    let (s, v) = call(r, "GET", "/v1/journals", Some(&only), None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["journals"].as_array().unwrap().len(), 1, "{v}");
    let (s, _) = call(r, "POST", "/v1/journals", Some(&only), Some(json!({"name": "more"}))).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, _) = call(r, "DELETE", "/v1/journals/orders", Some(&only), None).await;
    assert_eq!(s, StatusCode::FORBIDDEN);

    // An admin token is no tenant's.
    let admin = paros_gateway::mint_admin_token(w.gateway.active_key(), 60);
    let (s, _) = call(r, "GET", "/v1/journals", Some(&admin), None).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_open_signup_off_only_an_admin_signs_up() {
    let w = common::world_with(paros_gateway::GatewayConfig { open_signup: false, ..common::test_config() }).await;
    let r = &w.router;
    let body = || Some(json!({"name": "acme"}));
    let (s, _) = call(r, "POST", "/v1/signup", None, body()).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let admin = paros_gateway::mint_admin_token(w.gateway.active_key(), 60);
    let (s, v) = call(r, "POST", "/v1/signup", Some(&admin), body()).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let owner = v["token"].as_str().unwrap().to_owned();
    let (s, v) = call(r, "POST", "/v1/signup", Some(&owner), Some(json!({"name": "other"}))).await;
    assert_eq!((s, code(&v)), (StatusCode::FORBIDDEN, "forbidden"));
    let (s, v) = call(r, "POST", "/v1/signup", Some(&admin), body()).await;
    assert_eq!((s, code(&v)), (StatusCode::CONFLICT, "name_taken"));
}

/// Rotation: a second gateway signs with a new key and still accepts the old key's tokens;
/// once the old key is retired, every gateway refuses its tokens within a second, and the new
/// key's tokens keep working on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_rotate_and_a_retired_keys_tokens_are_refused_everywhere_within_a_second() {
    let w = world().await;
    let old = &w.router;
    let (_, old_token, _) = signup(old, "acme").await;
    create(old, &old_token, "orders", None).await;

    let new_key = KeyPair::generate(KeyId::new("k2").unwrap());
    let keys = paros_gateway::SigningKeys { active: new_key.clone(), others: vec![w.key.clone()] };
    let rotated = paros_gateway::Gateway::start(
        w.cell.client.clone(),
        w.cell.coordinator(),
        w.cell.directory(),
        common::test_config(),
        keys,
    )
    .await
    .expect("a gateway with the new key starts");
    let new = &rotated.router();
    let list = |r: &'static str, t: &str| {
        let router = if r == "old" { old.clone() } else { new.clone() };
        let t = t.to_owned();
        async move { call(&router, "GET", "/v1/journals", Some(&t), None).await.0 }
    };
    assert_eq!(list("new", &old_token).await, StatusCode::OK, "the old key's token is good at the rotated gateway");
    let (s, minted) = mint(new, &old_token, json!({"scope": "read"})).await;
    assert_eq!(s, StatusCode::OK);
    let new_token = minted["token"].as_str().unwrap().to_owned();
    assert_eq!(
        list("old", &new_token).await,
        StatusCode::OK,
        "the new key's token is good at the old gateway (the key is in the registry)"
    );

    assert!(
        matches!(rotated.retire_key(new_key.kid()).await, Err(paros_gateway::RetireError::Active(_))),
        "the signing key is not retired"
    );
    assert!(matches!(
        rotated.retire_key(&KeyId::new("nope").unwrap()).await,
        Err(paros_gateway::RetireError::Unknown(_))
    ));
    let retired_at = Instant::now();
    rotated.retire_key(w.key.kid()).await.expect("the old key retires");
    for router in ["new", "old"] {
        loop {
            if list(router, &old_token).await == StatusCode::UNAUTHORIZED {
                break;
            }
            assert!(
                retired_at.elapsed() < Duration::from_secs(1),
                "the {router} gateway refuses a retired key's token within 1 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert_eq!(list("new", &new_token).await, StatusCode::OK);
    assert_eq!(list("old", &new_token).await, StatusCode::OK);
    rotated.retire_key(w.key.kid()).await.expect("retiring again is fine");

    // The old key is retired: a gateway that would still sign with it does not start, and one
    // that merely lists it starts without registering it again.
    let stale = paros_gateway::SigningKeys { active: w.key.clone(), others: vec![] };
    let refused = paros_gateway::Gateway::start(
        w.cell.client.clone(),
        w.cell.coordinator(),
        w.cell.directory(),
        common::test_config(),
        stale,
    )
    .await;
    assert!(matches!(refused, Err(paros_gateway::StartError::ActiveKeyRetired(_))));
    let keys = paros_gateway::SigningKeys { active: new_key, others: vec![w.key.clone()] };
    paros_gateway::Gateway::start(
        w.cell.client.clone(),
        w.cell.coordinator(),
        w.cell.directory(),
        common::test_config(),
        keys,
    )
    .await
    .expect("a retired key among the others is skipped");
}

/// A gateway restarting with a key an earlier start registered, while its directory has not
/// folded the registry yet (a large registry after a restart), starts once the directory shows
/// the key, instead of failing on the registry's "key id taken".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_whose_directory_lags_starts_with_the_key_it_registered_before() {
    let w = world().await;
    let folded = w.cell.directory();
    let (lagging, behind) = tokio::sync::watch::channel(paros_registry::daemon::Followed::default());
    let catch_up = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = folded.borrow().clone();
        lagging.send(now).unwrap();
        lagging
    });
    let keys = paros_gateway::SigningKeys { active: w.key.clone(), others: vec![] };
    let restarted =
        paros_gateway::Gateway::start(w.cell.client.clone(), w.cell.coordinator(), behind, common::test_config(), keys)
            .await;
    assert!(restarted.is_ok(), "the restart waits for its directory: {:?}", restarted.err());
    drop(catch_up.await.unwrap());
}

/// A suspended tenant's calls are 403 (its tokens are genuine; the tenant may not act); others
/// are untouched, and resuming it serves it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_tenants_calls_are_forbidden_until_it_is_resumed() {
    let w = world().await;
    let r = &w.router;
    let (tenant, a, _) = signup(r, "acme").await;
    let (_, b, _) = signup(r, "globex").await;
    create(r, &a, "orders", None).await;
    let tenant = paros_core::TenantId(u64::from_str_radix(&tenant, 16).unwrap());
    for status in [paros_registry::TenantStatus::Suspended, paros_registry::TenantStatus::Active] {
        let command = paros_registry::Command::SetTenantStatus { tenant, status };
        let request = paros_registry::Request {
            id: paros_registry::RequestId(rand_id()),
            op: paros_registry::Op::Command(command),
        };
        assert!(matches!(
            w.cell.coordinator().request(request).await,
            Ok(paros_registry::Answer::Verdict(paros_registry::Verdict::Accepted(_)))
        ));
        w.cell
            .wait_followers(Duration::from_secs(5), |d| d.tenant(tenant).is_some_and(|t| t.status == status))
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        let want =
            if status == paros_registry::TenantStatus::Suspended { StatusCode::FORBIDDEN } else { StatusCode::OK };
        loop {
            let (s, v) = call(r, "GET", "/v1/journals/orders", Some(&a), None).await;
            if s == want {
                if s == StatusCode::FORBIDDEN {
                    assert_eq!(code(&v), "forbidden");
                }
                break;
            }
            assert!(Instant::now() < deadline, "{status:?}: still {s}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(call(r, "GET", "/v1/journals", Some(&b), None).await.0, StatusCode::OK, "another tenant is served");
    }
}

fn rand_id() -> u128 {
    u128::from_le_bytes(auth::random_bytes::<16>())
}

/// Only the cell's own signing keys sign tokens the gateway accepts. The registry records a
/// tenant-scoped key (`AddSigningKey { scope: Tenant(..) }`), but a token it signs is refused
/// (401) whoever it names: its own tenant, another tenant, or admin; and a token id minted with
/// it is no token id the tenant minted (404 on revoke).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_signed_by_a_tenant_scoped_key_is_refused_for_every_principal() {
    let w = world().await;
    let r = &w.router;
    let (acme, acme_owner, _) = signup(r, "acme").await;
    let (globex, _, _) = signup(r, "globex").await;
    create(r, &acme_owner, "orders", None).await;
    let acme = paros_core::TenantId(u64::from_str_radix(&acme, 16).unwrap());
    let globex = paros_core::TenantId(u64::from_str_radix(&globex, 16).unwrap());

    let tenant_key = KeyPair::generate(KeyId::new("acme-own").unwrap());
    let command = paros_registry::Command::AddSigningKey {
        scope: paros_registry::KeyScope::Tenant(acme),
        kid: tenant_key.kid().clone(),
        public_key: bytes::Bytes::copy_from_slice(&tenant_key.public_key()),
    };
    let request =
        paros_registry::Request { id: paros_registry::RequestId(rand_id()), op: paros_registry::Op::Command(command) };
    assert!(
        matches!(
            w.cell.coordinator().request(request).await,
            Ok(paros_registry::Answer::Verdict(paros_registry::Verdict::Accepted(_)))
        ),
        "the registry records a tenant-scoped key"
    );
    let kid = tenant_key.kid().clone();
    w.cell.wait_followers(Duration::from_secs(5), |d| d.signing_key(&kid).is_some()).await.unwrap();
    // The gateway's own directory shows the key before anything is judged against it.
    let mut directory = w.cell.directory();
    let shown = directory.wait_for(|f| f.directory.as_deref().is_some_and(|d| d.signing_key(&kid).is_some()));
    tokio::time::timeout(Duration::from_secs(5), shown).await.unwrap().unwrap();

    let exp = auth::now_s() + 600;
    let (own, own_jti) = auth::mint_tenant_token(&tenant_key, acme, Scope::Owner, None, exp);
    let (other, _) = auth::mint_tenant_token(&tenant_key, globex, Scope::Owner, None, exp);
    let admin = paros_gateway::mint_admin_token(&tenant_key, 600);
    for (who, token, uri) in [
        ("its own tenant", &own, "/v1/journals/orders"),
        ("another tenant", &other, "/v1/journals"),
        ("admin", &admin, "/v1/admin/overview"),
    ] {
        let (s, v) = call(r, "GET", uri, Some(token), None).await;
        assert_eq!((s, code(&v)), (StatusCode::UNAUTHORIZED, "unauthorized"), "signed for {who}: {v}");
    }

    // The same claims signed by the cell's key are accepted: the key's scope is what refused.
    let (cell_signed, _) = auth::mint_tenant_token(&w.key, acme, Scope::Owner, None, exp);
    assert_eq!(call(r, "GET", "/v1/journals/orders", Some(&cell_signed), None).await.0, StatusCode::OK);
    let cell_admin = paros_gateway::mint_admin_token(&w.key, 600);
    assert_eq!(call(r, "GET", "/v1/admin/overview", Some(&cell_admin), None).await.0, StatusCode::OK);

    let (s, v) = call(r, "DELETE", &format!("/v1/tokens/{}", own_jti.as_str()), Some(&acme_owner), None).await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "unknown_token"), "a tenant key's token id: {v}");
}
