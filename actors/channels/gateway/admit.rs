//! The gateway's side of the ingress pipeline ([`clawbus_runtime::ingress`]): the pipeline of the
//! gateway's bus and router, and its typed errors as the API's [`Failure`]s.

use super::api::{ApiState, Failure};
use axum::http::StatusCode;
use clawbus_runtime::ingress::{Ingress, IngressError, Request, Submitted};

impl ApiState {
    /// The ingress pipeline over this gateway's bus and routing table.
    pub fn ingress(&self) -> Ingress {
        Ingress::routed(self.bus.clone(), self.router.clone())
    }
}

/// Submits `req` through the pipeline; its errors as the API answers them.
pub(super) async fn submit(state: &ApiState, req: Request) -> Result<Submitted, Failure> {
    state.ingress().submit(req).await.map_err(failure)
}

/// An ingress error as the API reports it: 404 `unknown_agent` / `unbound`, 409
/// `request_id_conflict` (a request id taken by another agent, text, session or lane), and the
/// bus's errors as [`Failure::bus`].
pub(super) fn failure(e: IngressError) -> Failure {
    match e {
        IngressError::UnknownAgent(_) => {
            Failure::new(StatusCode::NOT_FOUND, "unknown_agent", e.to_string())
        }
        IngressError::Unbound(_) => Failure::new(StatusCode::NOT_FOUND, "unbound", e.to_string()),
        IngressError::Conflict(m) => Failure::new(StatusCode::CONFLICT, "request_id_conflict", m),
        IngressError::Bus(e) => Failure::bus(e),
        e => Failure::new(StatusCode::SERVICE_UNAVAILABLE, "bus", e.to_string()),
    }
}
