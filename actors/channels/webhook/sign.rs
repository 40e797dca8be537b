//! Webhook signatures, inbound and outbound: `X-Clawbus-Signature: sha256=<hex>`, the
//! HMAC-SHA256 of the raw body with the hook's secret (read from the environment), compared in
//! constant time; `X-Clawbus-Delivery` carries the delivery id.

use crate::config::WebhookDef;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-clawbus-signature";
/// The delivery id header.
pub const DELIVERY_HEADER: &str = "x-clawbus-delivery";

/// A hook whose secret is not in the environment at start.
#[derive(Debug, thiserror::Error)]
#[error(
    "webhooks.{hook}.secret_env: the environment variable {env} is unset or empty (expected the hook's signing secret)"
)]
pub struct MissingSecret {
    /// The hook.
    pub hook: String,
    /// The variable it names.
    pub env: String,
}

/// The signing secret of hook `name`, read from the variable its `secret_env` names.
pub fn secret_from_env(name: &str, def: &WebhookDef) -> Result<Vec<u8>, MissingSecret> {
    std::env::var(&def.secret_env)
        .ok()
        .filter(|s| !s.is_empty())
        .map(String::into_bytes)
        .ok_or_else(|| MissingSecret {
            hook: name.to_string(),
            env: def.secret_env.clone(),
        })
}

/// Hex digits to bytes; `None` unless it is an even number of hex digits.
fn from_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect()
}

/// The signature header value of `body` with `secret`: `sha256=<hex HMAC-SHA256>` (what
/// inbound deliveries must carry, and what outbound ones carry).
pub fn sign(secret: &[u8], body: &[u8]) -> Option<String> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).ok()?;
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Some(format!("sha256={hex}"))
}

/// Whether `header` is `sha256=<hex>` of the HMAC-SHA256 of `body` with `secret`.
pub fn signature_matches(secret: &[u8], body: &[u8], header: &str) -> bool {
    let Some(sig) = header.trim().strip_prefix("sha256=").and_then(from_hex) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    // `verify_slice` compares in constant time.
    mac.verify_slice(&sig).is_ok()
}
