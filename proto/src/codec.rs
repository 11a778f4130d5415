//! MessagePack encoding of envelopes: named fields (`to_vec_named` semantics) and human-readable
//! uuids (strings), so other languages can read entries and fields can be added later. Decoding
//! refuses oversize input and unknown versions with typed errors and never panics.

use crate::envelope::{Envelope, PROTOCOL_VERSION};
use crate::error::{AgentdError, ErrorCode};
use serde::{Deserialize, Serialize};

/// Default decode cap: 1 MiB.
pub const DEFAULT_MAX_ENVELOPE_BYTES: usize = 1024 * 1024;

/// Encodes any value as MessagePack with named fields and string uuids.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, AgentdError> {
    let mut buf = Vec::with_capacity(256);
    let mut ser = rmp_serde::Serializer::new(&mut buf)
        .with_struct_map()
        .with_human_readable();
    value
        .serialize(&mut ser)
        .map_err(|e| AgentdError::new(ErrorCode::Internal, format!("encode: {e}")))?;
    Ok(buf)
}

/// Decodes a value written by [`encode`] (or any MessagePack map of the same shape).
pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, AgentdError> {
    let mut de = rmp_serde::Deserializer::from_read_ref(bytes).with_human_readable();
    T::deserialize(&mut de).map_err(|e| AgentdError::new(ErrorCode::BadEnvelope, e.to_string()))
}

/// Encodes an envelope.
pub fn encode_envelope(env: &Envelope) -> Result<Vec<u8>, AgentdError> {
    encode(env)
}

#[derive(Deserialize)]
struct VersionProbe {
    v: u16,
}

/// Decodes an envelope of at most `max_bytes`, checking the version first so that an envelope
/// from a newer writer is reported as such and not as garbage.
pub fn decode_envelope(bytes: &[u8], max_bytes: usize) -> Result<Envelope, AgentdError> {
    if bytes.len() > max_bytes {
        return Err(AgentdError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "envelope of {} bytes exceeds the cap of {max_bytes}",
                bytes.len()
            ),
        ));
    }
    // One pass on the happy path; the version is probed on its own only to explain a failure
    // (an envelope from a newer writer is reported as such, not as garbage).
    let unknown = |v: u16| {
        AgentdError::new(
            ErrorCode::BadEnvelope,
            format!("unknown envelope version {v} (this build speaks {PROTOCOL_VERSION})"),
        )
    };
    match decode::<Envelope>(bytes) {
        Ok(env) if env.v == PROTOCOL_VERSION => Ok(env),
        Ok(env) => Err(unknown(env.v)),
        Err(e) => match decode::<VersionProbe>(bytes) {
            Ok(probe) if probe.v != PROTOCOL_VERSION => Err(unknown(probe.v)),
            _ => Err(e),
        },
    }
}
