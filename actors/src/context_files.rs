//! A spawn's first message: its prompt with the context files it names appended, read only
//! from the configured `context_dirs` (a path that leaves them is refused).

use crate::deps::Deps;
use agentd_proto::{AgentdError, ErrorCode};
use std::path::{Component, Path, PathBuf};

/// A spawn's first message: the prompt (at most `limits.max_prompt_bytes`) with its context
/// files appended. `None` when there is neither.
pub(crate) fn first_message(
    deps: &Deps,
    prompt: Option<&str>,
    files: &[String],
) -> Result<Option<String>, AgentdError> {
    if let Some(p) = prompt {
        deps.config.limits.input().prompt(p)?;
    }
    if prompt.is_none() && files.is_empty() {
        return Ok(None);
    }
    let mut out = prompt.unwrap_or_default().to_string();
    for f in files {
        let text = read_context_file(deps, f)?;
        out.push_str(&format!(
            "\n\n<context_file path=\"{f}\">\n{text}\n</context_file>"
        ));
    }
    Ok(Some(out))
}

/// Reads one context file. The path is placed before the file system is touched: a relative
/// one against each context dir in turn, an absolute one as it is, `.` and `..` folded
/// lexically; a path that does not stay inside a context dir is never opened. One that does
/// must still be inside it with its links followed, be a file and be UTF-8 text. Whatever of
/// that fails, the answer is the same `invalid_argument`, so it tells nothing about the host's
/// files outside the context dirs. A file over `limits.context_file_max_bytes` (only ever one
/// inside them) is `payload_too_large`.
fn read_context_file(deps: &Deps, f: &str) -> Result<String, AgentdError> {
    let cap = deps.config.limits.context_file_max_bytes;
    let cwd = std::env::current_dir().ok();
    for dir in &deps.config.context_dirs {
        let Some(root) = absolute(dir, cwd.as_deref()) else {
            continue;
        };
        let candidate = if Path::new(f).is_absolute() {
            normalize(Path::new(f))
        } else {
            normalize(&root.join(f))
        };
        if !candidate.starts_with(&root) {
            continue;
        }
        let (Ok(real_root), Ok(real)) = (root.canonicalize(), candidate.canonicalize()) else {
            continue;
        };
        if !real.starts_with(&real_root) {
            continue;
        }
        let Ok(meta) = std::fs::metadata(&real) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        if meta.len() > cap {
            return Err(AgentdError::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "context file `{f}` has {} bytes; limits.context_file_max_bytes is {cap}",
                    meta.len()
                ),
            ));
        }
        if let Ok(text) = std::fs::read_to_string(&real) {
            return Ok(text);
        }
    }
    Err(AgentdError::new(
        ErrorCode::InvalidArgument,
        format!(
            "context file `{f}` is not a readable text file inside the context directories \
             (agents.context_dirs)"
        ),
    ))
}

/// `dir` made absolute against `cwd` and normalized, without touching the file system.
fn absolute(dir: &Path, cwd: Option<&Path>) -> Option<PathBuf> {
    if dir.is_absolute() {
        Some(normalize(dir))
    } else {
        cwd.map(|c| normalize(&c.join(dir)))
    }
}

/// `path` with `.` dropped and each `..` removing the component before it (none above the
/// root), lexically: links are not followed.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::normalize;
    use std::path::Path;

    #[test]
    fn normalize_folds_dots_lexically() {
        let n = |p: &str| normalize(Path::new(p));
        assert_eq!(n("/a/./b/../c"), Path::new("/a/c"));
        assert_eq!(n("/a/../../../etc/passwd"), Path::new("/etc/passwd"));
        assert_eq!(n("/ctx/../ctx2/x"), Path::new("/ctx2/x"));
        assert!(!n("/ctx/sub/../../etc").starts_with("/ctx"));
        assert!(n("/ctx/sub/../f").starts_with("/ctx"));
    }
}
