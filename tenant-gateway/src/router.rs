//! The router: every route of the contract, `/healthz`, `/metrics`, `/v1/openapi.json`, `/ui` and
//! the admin overview, behind their layers. It sits above the route modules and the OpenAPI
//! document, which never name it.

use axum::Router;
use axum::http::StatusCode;
use axum::middleware;
use axum::routing::{delete, get, post};

use crate::layers::{authenticate, observe};
use crate::routes::{journals, machines, ops, records, seats, session, tail, tenants};
use crate::state::Gateway;
use crate::{openapi, overview};

/// A route that does not exist: 404 with no API body (it is no API answer).
const NO_ROUTE: &str = "x-paros-no-route";

/// The gateway's router.
pub fn router(g: Gateway) -> Router {
    let authed = Router::new()
        .route("/v1/tokens", post(tenants::mint_token))
        .route("/v1/tokens/{token_id}", delete(tenants::revoke_token))
        .route("/v1/journals", post(journals::create_journal).get(journals::list_journals))
        .route("/v1/journals/{name}", get(journals::show_journal).delete(journals::delete_journal))
        .route("/v1/journals/{name}/leader", post(records::set_leader))
        .route("/v1/journals/{name}/records", post(records::write).get(records::read))
        .route("/v1/journals/{name}/truncate", post(records::truncate))
        .route("/v1/journals/{name}/session", post(session::session))
        .route("/v1/journals/{name}/tail", get(tail::tail))
        .route("/v1/admin/overview", get(overview::admin_overview))
        .route("/v1/admin/machines/{node}/stop", post(machines::stop))
        .route("/v1/admin/machines/{node}/start", post(machines::start))
        .route("/v1/admin/cell", get(seats::cell_status))
        .route("/v1/admin/machines", post(seats::admit))
        .route("/v1/admin/machines/{node}/drain", post(seats::drain))
        .route("/v1/admin/machines/{node}/retire", post(seats::retire))
        .route("/v1/admin/journals/{tenant}/{journal}/move", post(seats::move_seat))
        .route_layer(middleware::from_fn_with_state(g.clone(), authenticate));
    Router::new()
        .route("/v1/signup", post(tenants::signup))
        .route("/healthz", get(ops::healthz))
        .route("/readyz/{node}", get(machines::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/v1/openapi.json", get(openapi::openapi_json))
        .route("/ui", get(overview::ui))
        .merge(authed)
        .fallback(|| async { (StatusCode::NOT_FOUND, [(NO_ROUTE, "1")]) })
        .method_not_allowed_fallback(|| async { (StatusCode::METHOD_NOT_ALLOWED, [(NO_ROUTE, "1")]) })
        .layer(middleware::from_fn_with_state(g.clone(), observe))
        .with_state(g)
}

impl Gateway {
    /// The router serving this gateway; see [`router`].
    pub fn router(&self) -> Router {
        router(self.clone())
    }
}
