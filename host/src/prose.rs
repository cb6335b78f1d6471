//! How the host's messages are put together from parts, so that each reads once: a part that
//! already ends a sentence gets no second full stop, and an error's causes are not repeated
//! when the error's own text already quotes them.

/// `text` without its closing full stops, ready for `format!("{}. Next sentence", …)`. The
/// window guard's reference text ends with one ("Minimum is 16000."), and messages that quote
/// it printed "16000..".
pub fn clause(text: &str) -> &str {
    text.trim_end().trim_end_matches('.')
}

/// An error and its causes on one line, `: `-separated, leaving out each cause whose text the
/// line already holds. Most of our errors quote their source (`cannot read X: <os error>`), and
/// `{:#}` then printed the OS error twice.
pub fn error_chain(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_cause_is_printed_once() {
        let os = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file (os error 2)");
        let error = anyhow::Error::new(os)
            .context("cannot read `x`: No such file (os error 2); check the path");
        assert_eq!(
            error_chain(&error),
            "cannot read `x`: No such file (os error 2); check the path"
        );
        let fresh = anyhow::anyhow!("disk full").context("cannot write `y`");
        assert_eq!(error_chain(&fresh), "cannot write `y`: disk full");
    }

    #[test]
    fn a_clause_loses_its_full_stop() {
        assert_eq!(clause("Minimum is 16000."), "Minimum is 16000");
        assert_eq!(clause("no stop"), "no stop");
    }
}
