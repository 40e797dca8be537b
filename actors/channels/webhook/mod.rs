//! Outbound webhooks: the reply of a task that came in through `[webhooks.<name>]` (and a cron
//! announcement to `webhook:<name>`) is POSTed to the hook's `deliver_url` as JSON
//! `{hook, text, task_id?, job?}`, signed like inbound deliveries (`X-Clawbus-Timestamp: <Unix
//! seconds>`, `X-Clawbus-Signature: sha256=<hex HMAC-SHA256 of "{timestamp}.{body}" with the
//! hook's secret>`, the timestamp of each try its own) with `X-Clawbus-Delivery` set to the task
//! id (or the announcement's job), so a receiver can drop a repeat.
//!
//! A 2xx is delivered; a 408, 429 or 5xx (waiting what `Retry-After` says) and a connection
//! failure are tried again; any other status fails at once. The URL is the operator's: it may
//! be loopback or private, and it is not checked against the `web_fetch` rules.

pub(crate) mod sign;

use super::OutboundMessage;
use super::delivery::{SendError, Sink};
use clawbus_core::config::Config;
use serde_json::json;
use sign::{
    DELIVERY_HEADER, MissingSecret, SIGNATURE_HEADER, TIMESTAMP_HEADER, secret_from_env, sign,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How long one POST may take.
const POST_TIMEOUT: Duration = Duration::from_secs(15);

struct Target {
    url: String,
    secret: Vec<u8>,
}

/// POSTs replies to the hooks' `deliver_url`s.
pub(crate) struct WebhookSink {
    client: clawbus_runtime::model::LazyClient,
    targets: BTreeMap<String, Target>,
    /// The signing time of each try.
    clock: Arc<dyn bus::Clock>,
}

/// The outbound webhooks channel, prepared: the hooks with a `deliver_url` and their secrets,
/// read from the environment before the system starts. Started, it is the `webhook` delivery
/// actor.
pub(crate) struct WebhookChannel {
    targets: BTreeMap<String, Target>,
}

impl WebhookChannel {
    /// The hooks with a `deliver_url`, their secrets read from the environment; `None` when no
    /// hook delivers.
    pub(crate) fn prepare(config: &Config) -> Result<Option<Self>, MissingSecret> {
        let mut targets = BTreeMap::new();
        for (name, def) in &config.webhooks {
            let Some(url) = &def.deliver_url else {
                continue;
            };
            targets.insert(
                name.clone(),
                Target {
                    url: url.clone(),
                    secret: secret_from_env(name, def)?,
                },
            );
        }
        Ok((!targets.is_empty()).then_some(Self { targets }))
    }
}

#[async_trait::async_trait(?Send)]
impl crate::Prepared for WebhookChannel {
    async fn start(
        self: Box<Self>,
        system: &clawbus_runtime::system::Clawbus,
    ) -> Result<Box<dyn crate::Channel>, crate::ChannelError> {
        // Each try is signed at the system clock's time.
        let sink = WebhookSink {
            client: clawbus_runtime::model::LazyClient::shared(),
            targets: self.targets,
            clock: system.clock().clone(),
        };
        let deps = crate::delivery::DeliveryDeps::of(system);
        let handle = crate::delivery::DeliveryHandle::start(
            clawbus_core::ids::Channel::Webhook.as_str(),
            Arc::new(sink),
            deps,
        )
        .await?;
        Ok(Box::new(handle))
    }
}

#[async_trait::async_trait]
impl Sink for WebhookSink {
    async fn send(&self, msg: &OutboundMessage, to: &str, part: &str) -> Result<(), SendError> {
        let Some(target) = self.targets.get(to) else {
            return Err(SendError::Permanent {
                reason: format!("webhook {to:?} has no deliver_url"),
            });
        };
        let body =
            json!({ "hook": to, "text": part, "task_id": msg.task_id, "job": msg.job }).to_string();
        let timestamp_s = self.clock.now_ms() / 1000;
        let signature = sign(&target.secret, timestamp_s, body.as_bytes()).ok_or_else(|| {
            SendError::Permanent {
                reason: "the hook's secret cannot key an HMAC".into(),
            }
        })?;
        let delivery = msg
            .task_id
            .map(|t| t.to_string())
            .or_else(|| msg.job.clone())
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let client = self.client.get().map_err(|e| SendError::Transient {
            reason: format!("cannot build the HTTP client: {e}"),
            retry_after: None,
        })?;
        let resp = client
            .post(&target.url)
            .header("Content-Type", "application/json")
            .header(TIMESTAMP_HEADER, timestamp_s.to_string())
            .header(SIGNATURE_HEADER, signature)
            .header(DELIVERY_HEADER, delivery)
            .body(body)
            .timeout(POST_TIMEOUT)
            .send()
            .await
            .map_err(|e| SendError::Transient {
                reason: format!("POST to webhook {to:?} failed: {}", e.without_url()),
                retry_after: None,
            })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let reason = format!("webhook {to:?} answered HTTP {}", status.as_u16());
        if status.as_u16() == 408 || status.as_u16() == 429 || status.is_server_error() {
            let retry_after = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            Err(SendError::Transient {
                reason,
                retry_after,
            })
        } else {
            Err(SendError::Permanent { reason })
        }
    }
}
