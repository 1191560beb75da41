//! A minimal `multipart/form-data` parser for uploads: fields in order, each with its
//! name, optional filename and bytes. Malformed bodies are errors, never panics.

/// One part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// `name=` of the Content-Disposition.
    pub name: String,
    /// `filename=`, for file parts.
    pub filename: Option<String>,
    /// The content.
    pub data: Vec<u8>,
}

/// The boundary of a `multipart/form-data; boundary=...` content type.
pub fn boundary(content_type: &str) -> Option<String> {
    let mut pieces = content_type.split(';');
    let mime = pieces.next()?.trim();
    if !mime.eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    pieces
        .find_map(|p| {
            let (k, v) = p.trim().split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case("boundary")
                .then(|| v.trim().trim_matches('"').to_string())
        })
        .filter(|b| !b.is_empty() && b.len() <= 200)
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || from > haystack.len() {
        return None;
    }
    haystack[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// A `key="value"` (or unquoted) parameter of a header value.
fn header_param(header: &str, key: &str) -> Option<String> {
    header.split(';').skip(1).find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case(key)
            .then(|| v.trim().trim_matches('"').to_string())
    })
}

/// Splits `body` into parts.
pub fn parse(body: &[u8], boundary: &str) -> Result<Vec<Part>, String> {
    let delimiter = format!("--{boundary}").into_bytes();
    let mut pos = find(body, &delimiter, 0).ok_or("multipart body has no boundary")?;
    let mut parts = Vec::new();
    loop {
        pos += delimiter.len();
        if body.get(pos..pos + 2) == Some(b"--") {
            return Ok(parts);
        }
        // Skip the CRLF after the boundary line.
        pos = find(body, b"\r\n", pos).ok_or("truncated multipart boundary line")? + 2;
        let header_end = find(body, b"\r\n\r\n", pos).ok_or("multipart part without headers")?;
        let headers = String::from_utf8_lossy(&body[pos..header_end]).into_owned();
        let data_start = header_end + 4;
        let mut next_delimiter = b"\r\n".to_vec();
        next_delimiter.extend_from_slice(&delimiter);
        let data_end =
            find(body, &next_delimiter, data_start).ok_or("multipart part is not terminated")?;
        let disposition = headers
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("content-disposition:"))
            .ok_or("multipart part without Content-Disposition")?;
        let name = header_param(disposition, "name").ok_or("multipart part without name")?;
        parts.push(Part {
            name,
            filename: header_param(disposition, "filename"),
            data: body[data_start..data_end].to_vec(),
        });
        pos = data_end + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_go_style_uploads() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\niso\r\n\
--XyZ\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"user-data-101.iso\"\r\n\
Content-Type: application/octet-stream\r\n\r\n\x00\x01\r\n\x02\r\n--XyZ--\r\n";
        let parts = parse(body, "XyZ").expect("parses");
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name, "content");
        assert_eq!(parts[0].data, b"iso");
        assert_eq!(parts[1].filename.as_deref(), Some("user-data-101.iso"));
        assert_eq!(parts[1].data, b"\x00\x01\r\n\x02");
        assert_eq!(
            boundary("multipart/form-data; boundary=\"XyZ\"").as_deref(),
            Some("XyZ")
        );
        assert_eq!(boundary("text/plain; boundary=x"), None);
        assert!(parse(b"--XyZ\r\nContent-Disposition: form-data\r\n\r\nx", "XyZ").is_err());
    }

    proptest! {
        #[test]
        fn never_panics(body in proptest::collection::vec(any::<u8>(), 0..300), b in "[a-zA-Z0-9]{1,10}") {
            let _ = parse(&body, &b);
            let mut framed = format!("--{b}\r\n").into_bytes();
            framed.extend_from_slice(&body);
            let _ = parse(&framed, &b);
        }
    }
}
