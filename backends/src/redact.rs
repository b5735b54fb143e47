//! Passwords out of connection strings: every message, `Debug` and log line that names a store
//! shows its URL through [`redact`].

/// What stands where a password was.
pub(crate) const HIDDEN: &str = "***";

/// `text` with every password it may hold replaced by `***`:
///
/// - a URL's user info, `scheme://user:PASSWORD@host...`: everything from the first `:` to the
///   last `@` is hidden when that `:` comes before the first `@` (the driver takes the password
///   from between the two; a password holding an unescaped `@` or `/` is hidden whole, and a
///   URL with an `@` in its query may lose more than its password, never less);
/// - a `password` query parameter (`?password=...`, its key percent-decoded as the driver does);
/// - the `password` value of a libpq `key=value` connection string, quoted or not.
///
/// `file:` and `sqlite:` URLs name paths and come back unchanged.
pub(crate) fn redact(text: &str) -> String {
    if text.starts_with("file:") || text.starts_with("sqlite:") {
        return text.to_owned();
    }
    match text.split_once("://") {
        Some((scheme, rest)) => format!("{scheme}://{}", redact_after_scheme(rest)),
        // `user:password@host...` or `postgres:password@host`, a URL without its `//`.
        None if looks_like_user_info(text) => redact_after_scheme(text),
        None => redact_key_values(text),
    }
}

/// Whether `text` begins `name:...@`, with no `=` or whitespace before its first `@`.
fn looks_like_user_info(text: &str) -> bool {
    text.split_once('@').is_some_and(|(before, _)| {
        before.contains(':') && !before.contains(|c: char| c == '=' || c.is_whitespace())
    })
}

/// The part of a URL after `scheme://`.
fn redact_after_scheme(rest: &str) -> String {
    let colon = rest.find(':');
    let at = rest.find('@');
    let (user_info, tail) = match (colon, at) {
        (Some(colon), Some(at)) if colon < at => {
            let (user, _) = rest.split_at(colon);
            let (_, after) = rest.rsplit_once('@').unwrap_or((rest, ""));
            (format!("{user}:{HIDDEN}@"), after)
        }
        _ => (String::new(), rest),
    };
    let tail = match tail.split_once('?') {
        Some((base, query)) => format!("{base}?{}", redact_query(query)),
        None => tail.to_owned(),
    };
    user_info + &tail
}

/// A URL query with the value of every `password` parameter hidden.
fn redact_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| {
            let key = pair.split_once('=').map_or(pair, |(k, _)| k);
            if is_password_key(key) { format!("{key}={HIDDEN}") } else { pair.to_owned() }
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Whether a query key is `password` once percent-decoded (`pass%77ord` is).
fn is_password_key(key: &str) -> bool {
    let mut decoded = Vec::with_capacity(key.len());
    let mut bytes = key.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex: Vec<u8> = bytes.by_ref().take(2).collect();
            match std::str::from_utf8(&hex).ok().and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(v) => decoded.push(v),
                // A malformed escape: the driver refuses the URL; hide the value anyway.
                None => return true,
            }
        } else {
            decoded.push(b);
        }
    }
    decoded.eq_ignore_ascii_case(b"password")
}

/// A libpq `key=value ...` connection string with the `password` value hidden. Text that does
/// not parse is hidden from a `password` key to its end.
fn redact_key_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let trimmed = rest.trim_start();
        out.push_str(rest.get(..rest.len() - trimmed.len()).unwrap_or_default());
        rest = trimmed;
        if rest.is_empty() {
            return out;
        }
        let key_end = rest.find(|c: char| c == '=' || c.is_whitespace()).unwrap_or(rest.len());
        let (key, after_key) = rest.split_at(key_end);
        out.push_str(key);
        let secret = key.eq_ignore_ascii_case("password");
        let Some(value) = after_key.trim_start().strip_prefix('=') else {
            // Not `key=value`: the driver refuses it; nothing after a password key is shown.
            if secret {
                out.push_str(HIDDEN);
                return out;
            }
            rest = after_key;
            continue;
        };
        let value = value.trim_start();
        let len = value_len(value);
        let (shown, after) = value.split_at(len);
        out.push('=');
        out.push_str(if secret { HIDDEN } else { shown });
        rest = after;
    }
}

/// The length of a `key=value` string's value at the start of `text`: a quoted value to its
/// closing quote (`\` escapes the next character), a bare one to the next whitespace; an
/// unterminated quote runs to the end.
fn value_len(text: &str) -> usize {
    let quoted = text.starts_with('\'');
    let mut escaped = false;
    for (i, c) in text.char_indices().skip(usize::from(quoted)) {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if quoted && c == '\'' {
            return i + 1;
        } else if !quoted && c.is_whitespace() {
            return i;
        }
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "s3cretpw";

    #[test]
    fn a_urls_password_is_hidden_and_the_rest_kept() {
        for (url, shown) in [
            (
                "postgres://postgres:s3cretpw@127.0.0.1:5999/test",
                "postgres://postgres:***@127.0.0.1:5999/test",
            ),
            (
                "postgresql://u:s3cretpw@h/db?schema=j&pool_size=2",
                "postgresql://u:***@h/db?schema=j&pool_size=2",
            ),
            ("postgres://u:s3c@ret/pw@h:1/db", "postgres://u:***@h:1/db"),
            ("postgres://u:s3cr/etpw@h/db", "postgres://u:***@h/db"),
            ("postgres://u:@h/db", "postgres://u:***@h/db"),
            (
                "postgres://h/db?user=u&password=s3cretpw&x=1",
                "postgres://h/db?user=u&password=***&x=1",
            ),
            ("postgres://h/db?pass%77ord=s3cretpw", "postgres://h/db?pass%77ord=***"),
            ("postgres://h/db?PASSWORD=s3cretpw", "postgres://h/db?PASSWORD=***"),
            ("mysql://root:s3cretpw@h/db", "mysql://root:***@h/db"),
            ("postgres:s3cretpw@h/db", "postgres:***@h/db"),
            ("u:s3cretpw@h", "u:***@h"),
            ("postgres://u@h:5432/db", "postgres://u@h:5432/db"),
            ("postgres://h:5432/db", "postgres://h:5432/db"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }

    #[test]
    fn a_key_value_strings_password_is_hidden_quoted_or_not() {
        for (text, shown) in [
            ("host=h password=s3cretpw user=u", "host=h password=*** user=u"),
            ("host=h password = 's3cr\\'et pw' user=u", "host=h password=*** user=u"),
            ("password='s3cretpw", "password=***"),
            ("host=h password", "host=h password***"),
            ("host=h PASSWORD=s3cretpw", "host=h PASSWORD=***"),
            ("host=h application_name='a b'", "host=h application_name='a b'"),
        ] {
            assert_eq!(redact(text), shown, "{text}");
            assert!(!redact(text).contains(SECRET));
        }
    }

    #[test]
    fn paths_come_back_unchanged() {
        for url in ["file:./a:b@c", "sqlite:/tmp/x password=y.db", "file://u:p@h"] {
            assert_eq!(redact(url), url);
        }
    }
}
