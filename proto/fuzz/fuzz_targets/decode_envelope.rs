//! Any bytes given to the envelope decoder give an envelope or an error — never a panic, and
//! never more memory than the size cap allows. A decoded envelope encodes, and its encoding
//! decodes and encodes to the same bytes (bytes, not values: a NaN in a JSON value is not equal
//! to itself).
#![no_main]

use agentd_proto::{DEFAULT_MAX_ENVELOPE_BYTES, decode_envelope, encode_envelope};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(env) = decode_envelope(data, DEFAULT_MAX_ENVELOPE_BYTES) {
        let bytes = encode_envelope(&env).expect("a decoded envelope encodes");
        let again = decode_envelope(&bytes, DEFAULT_MAX_ENVELOPE_BYTES).expect("and decodes");
        assert_eq!(encode_envelope(&again).expect("and encodes"), bytes);
    }
});
