//! `${VAR}` references inside `env` and `headers` values: each is replaced by the variable's
//! value; an unset variable is a start-up error (a server started without its token would fail
//! later and less clearly). `$${` writes a literal `${`.

/// Why a value cannot be expanded. Names the variable, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// The value names a variable that is not set.
    #[error("names ${{{0}}}, which is not set")]
    Unset(String),
    /// A `${` without its `}`, or a name that is not `[A-Za-z_][A-Za-z0-9_]*`.
    #[error("a reference must be ${{NAME}} with NAME made of letters, digits and _")]
    Malformed,
}

/// `value` with every `${NAME}` replaced by `var(NAME)`.
pub fn expand(value: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        if let Some(literal) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = literal;
        } else if let Some(reference) = after.strip_prefix("${") {
            let Some(end) = reference.find('}') else {
                return Err(ExpandError::Malformed);
            };
            let name = &reference[..end];
            let valid = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(ExpandError::Malformed);
            }
            out.push_str(&var(name).ok_or_else(|| ExpandError::Unset(name.to_string()))?);
            rest = &reference[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("t0k".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn references_expand_and_the_rest_stays() {
        assert_eq!(expand("Bearer ${TOKEN}", &var), Ok("Bearer t0k".into()));
        assert_eq!(expand("${TOKEN}${EMPTY}-$x", &var), Ok("t0k-$x".into()));
        assert_eq!(expand("$${TOKEN}", &var), Ok("${TOKEN}".into()));
        assert_eq!(expand("plain", &var), Ok("plain".into()));
    }

    #[test]
    fn unset_and_malformed_references_are_errors() {
        assert_eq!(
            expand("${NOPE}", &var),
            Err(ExpandError::Unset("NOPE".into()))
        );
        assert_eq!(expand("${TOKEN", &var), Err(ExpandError::Malformed));
        assert_eq!(expand("${1X}", &var), Err(ExpandError::Malformed));
        assert_eq!(expand("${}", &var), Err(ExpandError::Malformed));
    }
}
