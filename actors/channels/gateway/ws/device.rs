//! A client's signed device identity (`connect.params.device`): the Ed25519 signature over the
//! challenge nonce is verified, as OpenClaw's gateway does (`packages/gateway-client/src/
//! device-auth.ts`): `device.id` is the hex SHA-256 of the raw public key (base64url), the
//! nonce is the one this connection's `connect.challenge` carried, `signedAt` is within
//! [`MAX_SKEW_MS`] of now, and the signature (base64url) is over the `v3` payload
//! `v3|id|clientId|clientMode|role|scopes,…|signedAt|token|nonce|platform|deviceFamily` (or the
//! older `v2` one, without the last two). A bad one is refused with OpenClaw's
//! `DEVICE_AUTH_*` detail codes.
//!
//! The gateway token is the credential here: a valid one on loopback needs no pairing, and a
//! device identity adds no scope to it.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// How far `signedAt` may be from the server's clock.
pub(super) const MAX_SKEW_MS: u64 = 10 * 60 * 1000;

/// `connect.params.device`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DeviceParams {
    /// The hex SHA-256 of the raw public key.
    pub id: String,
    /// The raw Ed25519 public key, base64url (or base64).
    pub public_key: String,
    /// The signature, base64url.
    pub signature: String,
    /// When it was signed (ms; the challenge's `ts`).
    pub signed_at: u64,
    /// The challenge nonce signed.
    #[serde(default)]
    pub nonce: Option<String>,
}

/// What else the signature binds.
#[derive(Debug, Clone)]
pub(super) struct Signed<'a> {
    /// `client.id`.
    pub client_id: &'a str,
    /// `client.mode`.
    pub client_mode: &'a str,
    /// `role`.
    pub role: &'a str,
    /// `scopes`, as sent.
    pub scopes: &'a [String],
    /// `auth.token` (empty when none).
    pub token: &'a str,
    /// `client.platform`.
    pub platform: &'a str,
    /// `client.deviceFamily`.
    pub device_family: &'a str,
}

/// Why a device identity was refused: OpenClaw's message, `details.code` and `details.reason`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BadDevice {
    /// The message (`device signature invalid`).
    pub message: &'static str,
    /// `DEVICE_AUTH_…`.
    pub code: &'static str,
    /// `device-signature`, ….
    pub reason: &'static str,
}

const fn bad(message: &'static str, code: &'static str, reason: &'static str) -> BadDevice {
    BadDevice {
        message,
        code,
        reason,
    }
}

fn decode(text: &str) -> Option<Vec<u8>> {
    let t = text.trim().trim_end_matches('=');
    URL_SAFE_NO_PAD
        .decode(t)
        .ok()
        .or_else(|| STANDARD.decode(text.trim()).ok())
}

/// Lower-cased and trimmed, as OpenClaw binds `platform` and `deviceFamily`.
fn metadata(v: &str) -> String {
    v.trim().to_ascii_lowercase()
}

/// Checks `device` against the nonce this connection sent and the clock.
pub(super) fn verify(
    device: &DeviceParams,
    nonce: &str,
    signed: &Signed<'_>,
    now_ms: u64,
) -> Result<(), BadDevice> {
    let sent = device.nonce.as_deref().map(str::trim).unwrap_or_default();
    if sent.is_empty() {
        return Err(bad(
            "device nonce required",
            "DEVICE_AUTH_NONCE_REQUIRED",
            "device-nonce-missing",
        ));
    }
    if sent != nonce {
        return Err(bad(
            "device nonce mismatch",
            "DEVICE_AUTH_NONCE_MISMATCH",
            "device-nonce-mismatch",
        ));
    }
    let key = decode(&device.public_key)
        .filter(|k| k.len() == 32)
        .ok_or(bad(
            "device public key invalid",
            "DEVICE_AUTH_PUBLIC_KEY_INVALID",
            "device-public-key",
        ))?;
    let id: String = Sha256::digest(&key)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if !id.eq_ignore_ascii_case(device.id.trim()) {
        return Err(bad(
            "device identity mismatch",
            "DEVICE_AUTH_DEVICE_ID_MISMATCH",
            "device-id-mismatch",
        ));
    }
    if now_ms.abs_diff(device.signed_at) > MAX_SKEW_MS {
        return Err(bad(
            "device signature expired",
            "DEVICE_AUTH_SIGNATURE_EXPIRED",
            "device-signature-stale",
        ));
    }
    let invalid = bad(
        "device signature invalid",
        "DEVICE_AUTH_SIGNATURE_INVALID",
        "device-signature",
    );
    let signature = decode(&device.signature).ok_or(invalid.clone())?;
    let common = [
        device.id.trim().to_string(),
        signed.client_id.to_string(),
        signed.client_mode.to_string(),
        signed.role.to_string(),
        signed.scopes.join(","),
        device.signed_at.to_string(),
        signed.token.to_string(),
        sent.to_string(),
    ];
    let v3 = format!(
        "v3|{}|{}|{}",
        common.join("|"),
        metadata(signed.platform),
        metadata(signed.device_family)
    );
    let v2 = format!("v2|{}", common.join("|"));
    let public = ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &key);
    let valid = [v3, v2]
        .iter()
        .any(|payload| public.verify(payload.as_bytes(), &signature).is_ok());
    if valid { Ok(()) } else { Err(invalid) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{Ed25519KeyPair, KeyPair};

    fn pair() -> Ed25519KeyPair {
        let rng = ring::rand::SystemRandom::new();
        let doc = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        Ed25519KeyPair::from_pkcs8(doc.as_ref()).unwrap()
    }

    fn signed() -> Signed<'static> {
        static SCOPES: std::sync::LazyLock<Vec<String>> =
            std::sync::LazyLock::new(|| vec!["operator.read".into(), "operator.write".into()]);
        Signed {
            client_id: "openclaw-tui",
            client_mode: "ui",
            role: "operator",
            scopes: &SCOPES,
            token: "tok",
            platform: "linux",
            device_family: "Linux",
        }
    }

    fn device(key: &Ed25519KeyPair, payload: &str, nonce: &str) -> DeviceParams {
        let raw = key.public_key().as_ref();
        DeviceParams {
            id: Sha256::digest(raw)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
            public_key: URL_SAFE_NO_PAD.encode(raw),
            signature: URL_SAFE_NO_PAD.encode(key.sign(payload.as_bytes()).as_ref()),
            signed_at: 1_000,
            nonce: Some(nonce.into()),
        }
    }

    fn v3(d: &DeviceParams, nonce: &str) -> String {
        format!(
            "v3|{}|openclaw-tui|ui|operator|operator.read,operator.write|1000|tok|{nonce}|linux|linux",
            d.id
        )
    }

    #[test]
    fn a_signature_over_the_challenge_nonce_is_accepted_v3_and_v2() {
        let key = pair();
        let mut d = device(&key, "", "n1");
        d.signature = URL_SAFE_NO_PAD.encode(key.sign(v3(&d, "n1").as_bytes()).as_ref());
        assert_eq!(verify(&d, "n1", &signed(), 2_000), Ok(()));
        let v2 = format!(
            "v2|{}|openclaw-tui|ui|operator|operator.read,operator.write|1000|tok|n1",
            d.id
        );
        d.signature = URL_SAFE_NO_PAD.encode(key.sign(v2.as_bytes()).as_ref());
        assert_eq!(verify(&d, "n1", &signed(), 2_000), Ok(()));
    }

    #[test]
    fn a_bad_identity_is_refused_with_openclaws_codes() {
        let key = pair();
        let mut good = device(&key, "", "n1");
        good.signature = URL_SAFE_NO_PAD.encode(key.sign(v3(&good, "n1").as_bytes()).as_ref());
        let code = |d: &DeviceParams, nonce: &str, now: u64| {
            verify(d, nonce, &signed(), now).err().map(|e| e.code)
        };
        assert_eq!(
            code(&good, "other", 2_000),
            Some("DEVICE_AUTH_NONCE_MISMATCH"),
            "signed for another connection's challenge"
        );
        let mut no_nonce = good.clone();
        no_nonce.nonce = None;
        assert_eq!(
            code(&no_nonce, "n1", 2_000),
            Some("DEVICE_AUTH_NONCE_REQUIRED")
        );
        assert_eq!(
            code(&good, "n1", 1_000 + MAX_SKEW_MS + 1),
            Some("DEVICE_AUTH_SIGNATURE_EXPIRED")
        );
        let mut other_id = good.clone();
        other_id.id = "00".repeat(32);
        assert_eq!(
            code(&other_id, "n1", 2_000),
            Some("DEVICE_AUTH_DEVICE_ID_MISMATCH")
        );
        let mut short = good.clone();
        short.public_key = "AAAA".into();
        assert_eq!(
            code(&short, "n1", 2_000),
            Some("DEVICE_AUTH_PUBLIC_KEY_INVALID")
        );
        // Signed by another key, or over other scopes: invalid.
        let mut forged = good.clone();
        forged.signature = URL_SAFE_NO_PAD.encode(pair().sign(v3(&good, "n1").as_bytes()).as_ref());
        assert_eq!(
            code(&forged, "n1", 2_000),
            Some("DEVICE_AUTH_SIGNATURE_INVALID")
        );
        let more = vec!["operator.admin".to_string()];
        let wider = Signed {
            scopes: &more,
            ..signed()
        };
        assert_eq!(
            verify(&good, "n1", &wider, 2_000).err().map(|e| e.code),
            Some("DEVICE_AUTH_SIGNATURE_INVALID"),
            "the scopes asked for are bound by the signature"
        );
    }
}
