//! A manifest file as a sequence of documents, each kept as its exact text, so that the
//! documents a conversion does not touch are written back byte for byte.

/// One document: the `---` line that opened it (if any) and its text up to the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document<'a> {
    /// The separator line, with its line break (`---\n`), or empty for a first document
    /// without one.
    pub separator: &'a str,
    /// The document's text.
    pub body: &'a str,
}

/// Splits YAML text at its document markers (`---` at the start of a line, alone or
/// followed by a space). A JSON file is one document.
pub fn split(text: &str) -> Vec<Document<'_>> {
    let mut documents = Vec::new();
    let mut separator = "";
    let mut body_start = 0;
    let mut line_start = 0;
    while line_start < text.len() {
        let line_end = text[line_start..]
            .find('\n')
            .map_or(text.len(), |i| line_start + i + 1);
        let line = &text[line_start..line_end];
        if is_marker(line) {
            if line_start > body_start || !separator.is_empty() {
                documents.push(Document {
                    separator,
                    body: &text[body_start..line_start],
                });
            }
            separator = line;
            body_start = line_end;
        }
        line_start = line_end;
    }
    if body_start < text.len() || !separator.is_empty() {
        documents.push(Document {
            separator,
            body: &text[body_start..],
        });
    }
    documents
}

fn is_marker(line: &str) -> bool {
    let line = line.trim_end_matches(['\n', '\r']);
    line == "---" || line.starts_with("--- ") || line.starts_with("---\t")
}

/// Whether the document has comment lines (which a converted document cannot keep).
pub fn has_comments(body: &str) -> bool {
    body.lines().any(|line| line.trim_start().starts_with('#'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejoin(documents: &[Document<'_>]) -> String {
        documents
            .iter()
            .map(|d| format!("{}{}", d.separator, d.body))
            .collect()
    }

    #[test]
    fn splits_at_markers_and_rejoins_exactly() {
        for text in [
            "a: 1\n---\nb: 2\n",
            "---\na: 1\n--- # second\nb: 2\n---\n",
            "# only a comment\n",
            "a: |\n  text\n  ---x\n---\r\nb: 2",
            "",
        ] {
            assert_eq!(rejoin(&split(text)), text, "{text:?}");
        }
        let documents = split("---\na: 1\n--- # second\nb: 2\n");
        assert_eq!(
            documents,
            [
                Document {
                    separator: "---\n",
                    body: "a: 1\n"
                },
                Document {
                    separator: "--- # second\n",
                    body: "b: 2\n"
                },
            ]
        );
    }

    #[test]
    fn finds_comment_lines() {
        assert!(has_comments("a: 1\n  # why\n"));
        assert!(!has_comments("a: '#1'\n"));
    }
}
