//! The YAML layer: the node tree the Go build's reader (yaml.v3) builds
//! from a file, and yaml.v3's rules for what a plain scalar is.
//!
//! Why not serde-saphyr: the Go build's error texts need more than a serde
//! deserializer gives. They name the line of every key and value, the
//! field path of a value brought in by a merge key (`<<: *defaults`), the
//! line where a duplicated key was first given, whether a field was given
//! at all (to tell a missing field from a zero one), and which of several
//! problems yaml.v3 meets first (an unknown field is noted and decoding
//! goes on; a bad duration stops it). So the reader builds yaml.v3's node
//! tree itself, from the events of saphyr-parser (the parser layer under
//! serde-saphyr: no unsafe, no panics, positions on every event), and
//! decodes the tree as yaml.v3 decodes it (`decode.rs`).
//!
//! What differs from yaml.v3: the texts of syntax errors. yaml.v3 is a port
//! of libyaml and saphyr-parser an independent parser of YAML 1.2, so a
//! malformed file is refused by both but not always with the same words or
//! on the same line; the common problems are reworded as yaml.v3 words them
//! (`syntax_error`). A few inputs one parser accepts and the other refuses
//! (libyaml is laxer about indentation inside flow collections, and counts
//! NEL, U+2028 and U+2029 as line breaks) are left as they are.

use std::borrow::Cow;
use std::collections::BTreeMap;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span, StrInput};

/// Index of a node in its tree.
pub(crate) type NodeId = usize;

/// yaml.v3's node kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Document,
    Sequence,
    Mapping,
    Scalar,
    Alias,
}

/// One node, with what yaml.v3 keeps of it.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub kind: Kind,
    /// The short tag: "!!str", "!!int", "!!map", a custom "!foo"; "" for
    /// documents and aliases.
    pub tag: String,
    /// The scalar's text, or the alias's anchor name.
    pub value: String,
    /// 1-based.
    pub line: usize,
    pub column: usize,
    pub content: Vec<NodeId>,
    /// What an alias refers to.
    pub alias: Option<NodeId>,
}

impl Node {
    /// yaml.v3's `indicatedString`: a scalar that is a string because of
    /// how it is written or tagged, whatever its text.
    pub fn indicated_string(&self) -> bool {
        self.kind == Kind::Scalar && self.tag == STR
    }
}

/// A document's nodes; the document node is the first.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tree {
    pub nodes: Vec<Node>,
}

impl Tree {
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id]
    }

    /// yaml.v3's `ShortTag`: the node's tag, an alias's target's, or what
    /// the style or text implies.
    pub fn short_tag(&self, id: NodeId) -> &str {
        let n = &self.nodes[id];
        match n.kind {
            Kind::Alias => n.alias.map_or("", |a| self.short_tag(a)),
            _ => &n.tag,
        }
    }
}

pub(crate) const NULL: &str = "!!null";
pub(crate) const BOOL: &str = "!!bool";
pub(crate) const STR: &str = "!!str";
pub(crate) const INT: &str = "!!int";
pub(crate) const FLOAT: &str = "!!float";
pub(crate) const TIMESTAMP: &str = "!!timestamp";
pub(crate) const SEQ: &str = "!!seq";
pub(crate) const MAP: &str = "!!map";
pub(crate) const BINARY: &str = "!!binary";
pub(crate) const MERGE: &str = "!!merge";

const LONG_TAG_PREFIX: &str = "tag:yaml.org,2002:";

/// yaml.v3's `shortTag`: "tag:yaml.org,2002:str" is "!!str".
pub(crate) fn short_tag(tag: &str) -> String {
    match tag.strip_prefix(LONG_TAG_PREFIX) {
        Some(rest) => format!("!!{rest}"),
        None => tag.to_string(),
    }
}

/// A file yaml.v3 cannot parse: its message, and its line when it names
/// one (0 otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub line: usize,
    pub message: String,
}

impl SyntaxError {
    fn new(line: usize, message: impl Into<String>) -> SyntaxError {
        SyntaxError {
            line,
            message: message.into(),
        }
    }
}

/// yaml.v3's (libyaml's) limit on nesting.
const MAX_DEPTH: usize = 10_000;

/// A stream of documents, read one at a time as yaml.v3's decoder reads
/// them.
pub(crate) struct Reader<'a> {
    text: &'a str,
    parser: Parser<'a, StrInput<'a>>,
    /// Anchor ids (saphyr-parser numbers them) to the node they name, in
    /// the document being built.
    anchors: BTreeMap<usize, NodeId>,
    /// Byte offset of each character, built when an alias needs its name.
    char_offsets: Option<Vec<usize>>,
    done: bool,
}

/// An open collection while a tree is built.
struct Open {
    id: NodeId,
    /// A flow collection (`[...]`, `{...}`) rather than a block one.
    flow: bool,
}

impl<'a> Reader<'a> {
    pub fn new(text: &'a str) -> Reader<'a> {
        Reader {
            text,
            parser: Parser::new_from_str(text),
            anchors: BTreeMap::new(),
            char_offsets: None,
            done: false,
        }
    }

    /// The next document's tree, or None at the end of the stream.
    pub fn next_document(&mut self) -> Result<Option<Tree>, SyntaxError> {
        if self.done {
            return Ok(None);
        }
        let mut tree = Tree::default();
        let mut open: Vec<Open> = Vec::new();
        // The document node, once its start is seen.
        let mut started = false;
        loop {
            let (event, span) = match self.parser.next_event() {
                None => {
                    self.done = true;
                    return Ok(None);
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Err(self.syntax_error(&e, &tree, &open));
                }
                Some(Ok(ev)) => ev,
            };
            let (mut line, mut column) = (span.start.line(), span.start.col() + 1);
            if let Event::Scalar(_, ScalarStyle::Literal | ScalarStyle::Folded, _, _) = &event
                && let Some((l, c)) = self.block_indicator(span.start.index())
            {
                // libyaml places a block scalar at its | or > (or at its
                // anchor or tag); saphyr-parser at its first line of text.
                (line, column) = (l, c);
            }
            let new_node = |kind, tag: String, value: String| Node {
                kind,
                tag,
                value,
                line,
                column,
                content: Vec::new(),
                alias: None,
            };
            let id = tree.nodes.len();
            match event {
                Event::StreamStart | Event::Nothing => continue,
                Event::StreamEnd => {
                    self.done = true;
                    return Ok(None);
                }
                Event::DocumentStart(_) => {
                    tree.nodes
                        .push(new_node(Kind::Document, String::new(), String::new()));
                    open.push(Open { id, flow: false });
                    started = true;
                    continue;
                }
                Event::DocumentEnd => {
                    if started {
                        return Ok(Some(tree));
                    }
                    continue;
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    open.pop();
                    continue;
                }
                Event::Scalar(value, style, anchor, tag) => {
                    let quoted = style != ScalarStyle::Plain;
                    let tag = match explicit_tag(tag.as_deref()) {
                        Some(t) => t,
                        None if quoted => STR.to_string(),
                        None if value == "<<" => MERGE.to_string(),
                        None => resolve_tag(&value),
                    };
                    tree.nodes
                        .push(new_node(Kind::Scalar, tag, value.into_owned()));
                    self.anchor(anchor, id);
                }
                Event::Alias(anchor) => {
                    let name = self.alias_name(span);
                    let mut n = new_node(Kind::Alias, String::new(), name);
                    n.alias = self.anchors.get(&anchor).copied();
                    tree.nodes.push(n);
                }
                Event::SequenceStart(anchor, tag) => {
                    let tag = explicit_tag(tag.as_deref()).unwrap_or_else(|| SEQ.to_string());
                    tree.nodes
                        .push(new_node(Kind::Sequence, tag, String::new()));
                    self.anchor(anchor, id);
                }
                Event::MappingStart(anchor, tag) => {
                    let tag = explicit_tag(tag.as_deref()).unwrap_or_else(|| MAP.to_string());
                    tree.nodes.push(new_node(Kind::Mapping, tag, String::new()));
                    self.anchor(anchor, id);
                }
            }
            // Attach the node to its parent.
            if let Some(parent) = open.last() {
                tree.nodes[parent.id].content.push(id);
            }
            if matches!(tree.nodes[id].kind, Kind::Sequence | Kind::Mapping) {
                let flow = matches!(self.char_at(span.start.index()), Some('[' | '{'));
                open.push(Open { id, flow });
                if open.len() > MAX_DEPTH {
                    self.done = true;
                    return Err(SyntaxError::new(
                        line,
                        format!("exceeded max depth of {MAX_DEPTH}"),
                    ));
                }
            }
        }
    }

    fn anchor(&mut self, anchor: usize, id: NodeId) {
        // saphyr-parser numbers anchors from 1; 0 is "no anchor".
        if anchor > 0 {
            self.anchors.insert(anchor, id);
        }
    }

    /// The text at character index `i`.
    fn char_at(&mut self, i: usize) -> Option<char> {
        let offsets = self.offsets();
        let start = *offsets.get(i)?;
        self.text[start..].chars().next()
    }

    fn offsets(&mut self) -> &[usize] {
        let text = self.text;
        self.char_offsets
            .get_or_insert_with(|| text.char_indices().map(|(i, _)| i).collect())
    }

    /// The text between two character indices.
    fn slice(&mut self, from: usize, to: usize) -> String {
        let len = self.text.len();
        let offsets = self.offsets();
        let start = offsets.get(from).copied().unwrap_or(len);
        let end = offsets.get(to).copied().unwrap_or(len).max(start);
        self.text[start..end].to_string()
    }

    /// The line and column of the `|` or `>` that starts the block scalar
    /// whose span starts at character index `i`, when the span does not
    /// start at it (or at an anchor or tag before it).
    fn block_indicator(&mut self, i: usize) -> Option<(usize, usize)> {
        if matches!(self.char_at(i), Some('|' | '>' | '&' | '!')) {
            return None;
        }
        let len = self.text.len();
        let end = self.offsets().get(i).copied().unwrap_or(len);
        let before = &self.text[..end];
        // The last | or > outside a comment.
        let mut at = before.len();
        loop {
            let pos = before[..at].rfind(['|', '>'])?;
            let line_start = before[..pos].rfind('\n').map_or(0, |n| n + 1);
            let in_comment = before[line_start..pos].match_indices('#').any(|(h, _)| {
                h == 0 || before.as_bytes()[line_start + h - 1].is_ascii_whitespace()
            });
            if !in_comment {
                let line = before[..pos].matches('\n').count() + 1;
                let column = before[line_start..pos].chars().count() + 1;
                return Some((line, column));
            }
            at = pos;
        }
    }

    /// The name of the alias at `span` (`*name`).
    fn alias_name(&mut self, span: Span) -> String {
        let text = self.slice(span.start.index(), span.end.index());
        text.strip_prefix('*').unwrap_or(&text).to_string()
    }

    /// The anchor name an alias at character index `i` refers to: what
    /// follows the `*` up to a blank or flow indicator.
    fn alias_name_at(&mut self, i: usize) -> String {
        let rest = self.slice(i, usize::MAX);
        rest.strip_prefix('*')
            .unwrap_or(&rest)
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, ',' | '[' | ']' | '{' | '}'))
            .collect()
    }

    /// saphyr-parser's error in yaml.v3's words.
    fn syntax_error(&mut self, e: &ScanError, tree: &Tree, open: &[Open]) -> SyntaxError {
        let info = e.info();
        let line = e.marker().line();
        // The innermost open flow collection, if the error is inside one.
        let in_flow = open
            .last()
            .filter(|o| o.flow)
            .map(|o| tree.nodes[o.id].kind);
        let flow_problem = |kind| match kind {
            Kind::Mapping => "did not find expected ',' or '}'",
            _ => "did not find expected ',' or ']'",
        };
        match info {
            "while parsing node, found unknown anchor" => {
                let name = self.alias_name_at(e.marker().index());
                return SyntaxError::new(0, format!("unknown anchor '{name}' referenced"));
            }
            "while scanning a plain scalar, found a tab" => {
                // yaml.v3 names the line where the scalar starts, unless that
                // is the first line (it takes line 0 for "no line"): then the
                // tab's.
                let line = if line > 1 {
                    line
                } else {
                    self.line_of_tab_after(e.marker().index())
                };
                return SyntaxError::new(line, "found a tab character that violates indentation");
            }
            "invalid indentation" | "unexpected eof" | "unexpected end of plain scalar" => {
                if let Some(kind) = in_flow {
                    return SyntaxError::new(line, flow_problem(kind));
                }
            }
            // libyaml's parser names the line of the open block collection
            // (its context), 0-based: yaml.v3 prints it as it is, so one
            // line early, and prints none for 0.
            "while parsing a block mapping, did not find expected key"
            | "while parsing a block collection, did not find expected '-' indicator" => {
                let want = if info.contains("mapping") {
                    Kind::Mapping
                } else {
                    Kind::Sequence
                };
                let context = open
                    .iter()
                    .rev()
                    .find(|o| !o.flow && tree.nodes[o.id].kind == want)
                    .map_or(line, |o| tree.nodes[o.id].line);
                let line = if context > 1 {
                    context - 1
                } else {
                    line.saturating_sub(1)
                };
                let problem = info.split_once(", ").map_or(info, |(_, p)| p);
                return SyntaxError::new(line, problem);
            }
            "while parsing a node, did not find expected node content" => {
                return SyntaxError::new(
                    line.saturating_sub(1),
                    "did not find expected node content",
                );
            }
            // The scanner's: yaml.v3 names the key's line, saphyr-parser the
            // line after it.
            "simple key expect ':'" => {
                return SyntaxError::new(
                    first_line_none(line.saturating_sub(1)),
                    "could not find expected ':'",
                );
            }
            "tabs disallowed within this context (block indentation)" => {
                return SyntaxError::new(
                    first_line_none(line),
                    "found character that cannot start any token",
                );
            }
            "mapping values are not allowed in this context" => {
                return SyntaxError::new(first_line_none(line), info);
            }
            "while scanning a quoted scalar, found unexpected end of stream" => {
                // yaml.v3 names the quote's line, or when that is the first
                // the end's, or none when that is the first too.
                let line = if line > 1 {
                    line
                } else {
                    first_line_none(self.text.matches('\n').count() + 1)
                };
                return SyntaxError::new(line, "found unexpected end of stream");
            }
            _ => {}
        }
        // libyaml says "while parsing X" as the context and yaml.v3 prints
        // only the problem that follows it.
        let problem = match info.strip_prefix("while ") {
            Some(rest) => rest.split_once(", ").map_or(info, |(_, p)| p),
            None => info,
        };
        let problem = match problem {
            "expected ',' or ']'" => "did not find expected ',' or ']'",
            "found unexpected end of stream" => "found unexpected end of stream",
            p => p,
        };
        SyntaxError::new(line, problem)
    }

    /// The line of the first tab at or after character index `i`.
    fn line_of_tab_after(&mut self, i: usize) -> usize {
        let len = self.text.len();
        let start = self.offsets().get(i).copied().unwrap_or(len);
        let before = self.text[..start].matches('\n').count();
        match self.text[start..].find('\t') {
            Some(t) => before + self.text[start..start + t].matches('\n').count() + 1,
            None => before + 1,
        }
    }
}

/// yaml.v3 takes a mark on the first line for no mark at all.
fn first_line_none(line: usize) -> usize {
    if line <= 1 { 0 } else { line }
}

/// A node's explicit tag in short form; None for no tag or the
/// non-specific "!", which yaml.v3 resolves as if untagged.
fn explicit_tag(tag: Option<&saphyr_parser::Tag>) -> Option<String> {
    let tag = tag?;
    let full = format!("{}{}", tag.handle, tag.suffix);
    if full.is_empty() || full == "!" {
        return None;
    }
    Some(short_tag(&full))
}

/// The input as text: yaml.v3 reads UTF-8 (a leading byte order mark
/// dropped) and UTF-16 with a byte order mark, and refuses control
/// characters.
pub(crate) fn decode_input(data: &[u8]) -> Result<Cow<'_, str>, SyntaxError> {
    let text: Cow<'_, str> = if let Some(rest) = data.strip_prefix(&[0xff, 0xfe]) {
        Cow::Owned(utf16(rest, u16::from_le_bytes)?)
    } else if let Some(rest) = data.strip_prefix(&[0xfe, 0xff]) {
        Cow::Owned(utf16(rest, u16::from_be_bytes)?)
    } else {
        let data = data.strip_prefix(b"\xef\xbb\xbf").unwrap_or(data);
        match std::str::from_utf8(data) {
            Ok(s) => Cow::Borrowed(s),
            Err(e) => return Err(SyntaxError::new(0, utf8_problem(&data[e.valid_up_to()..]))),
        }
    };
    let printable = |c: char| {
        matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}')
            || c >= '\u{10000}'
    };
    if !text.chars().all(printable) {
        return Err(SyntaxError::new(0, "control characters are not allowed"));
    }
    Ok(text)
}

/// libyaml's name for the invalid UTF-8 sequence at the start of `bad`.
fn utf8_problem(bad: &[u8]) -> &'static str {
    let first = bad[0];
    let width = match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => return "invalid leading UTF-8 octet",
    };
    if bad.len() < width {
        return "incomplete UTF-8 octet sequence";
    }
    if bad[1..width].iter().any(|b| b & 0xc0 != 0x80) {
        return "invalid trailing UTF-8 octet";
    }
    let mut value = u32::from(first) & (0xff >> (width + 1));
    for b in &bad[1..width] {
        value = value << 6 | u32::from(b & 0x3f);
    }
    let shortest = match width {
        2 => value >= 0x80,
        3 => value >= 0x800,
        _ => value >= 0x10000,
    };
    if !shortest {
        return "invalid length of a UTF-8 sequence";
    }
    "invalid Unicode character"
}

fn utf16(data: &[u8], word: fn([u8; 2]) -> u16) -> Result<String, SyntaxError> {
    if !data.len().is_multiple_of(2) {
        return Err(SyntaxError::new(0, "incomplete UTF-16 character"));
    }
    let words = data.chunks_exact(2).map(|c| word([c[0], c[1]]));
    char::decode_utf16(words)
        .collect::<Result<String, _>>()
        .map_err(|_| SyntaxError::new(0, "invalid UTF-16 surrogate pair"))
}

/// The tag yaml.v3 gives a plain scalar: `resolve("", value)`.
pub(crate) fn resolve_tag(value: &str) -> String {
    match resolve("", value) {
        Ok(r) => r.tag().to_string(),
        // resolve only fails for explicit tags.
        Err(_) => STR.to_string(),
    }
}

/// A scalar's value as yaml.v3 resolves it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resolved {
    Null,
    Bool(bool),
    /// Go's int or int64.
    Int(i64),
    /// Go's uint64: an integer above i64::MAX.
    Uint(u64),
    Float(f64),
    /// The text, or a !!binary's decoded bytes.
    Str(String),
    /// A timestamp (its value is not needed, only that it is one).
    Timestamp,
    /// A value under a tag yaml.v3 does not resolve (`!foo`, `!!binary`):
    /// the tag and the text.
    Other(String, String),
    Merge,
}

impl Resolved {
    pub fn tag(&self) -> &str {
        match self {
            Resolved::Null => NULL,
            Resolved::Bool(_) => BOOL,
            Resolved::Int(_) | Resolved::Uint(_) => INT,
            Resolved::Float(_) => FLOAT,
            Resolved::Str(_) => STR,
            Resolved::Timestamp => TIMESTAMP,
            Resolved::Other(tag, _) => tag,
            Resolved::Merge => MERGE,
        }
    }
}

/// yaml.v3's `resolve(tag, in)`: what a scalar is under its (short) tag.
/// An explicit tag the text does not fit is an error, worded as yaml.v3's
/// ("cannot decode !!str `x` as a !!int").
pub(crate) fn resolve(tag: &str, input: &str) -> Result<Resolved, String> {
    if !matches!(tag, "" | STR | BOOL | INT | FLOAT | NULL | TIMESTAMP) {
        return Ok(Resolved::Other(tag.to_string(), input.to_string()));
    }
    let out = resolve_plain(tag, input);
    let rtag = out.tag().to_string();
    if tag.is_empty() || tag == rtag || tag == STR {
        return Ok(out);
    }
    if tag == FLOAT
        && let Resolved::Int(v) = out
    {
        return Ok(Resolved::Float(v as f64));
    }
    Err(format!("cannot decode {rtag} `{input}` as a {tag}"))
}

fn resolve_plain(tag: &str, input: &str) -> Resolved {
    let hint = match input.as_bytes().first() {
        None => 'N',
        Some(b'+' | b'-') => 'S',
        Some(b'0'..=b'9') => 'D',
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~' | b'<') => {
            'M'
        }
        Some(b'.') => '.',
        Some(_) => '\0',
    };
    if hint == '\0' || tag == STR || tag == BINARY {
        return Resolved::Str(input.to_string());
    }
    match input {
        "true" | "True" | "TRUE" => return Resolved::Bool(true),
        "false" | "False" | "FALSE" => return Resolved::Bool(false),
        "" | "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Resolved::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
        "<<" => return Resolved::Merge,
        _ => {}
    }
    match hint {
        '.' => {
            if let Some(f) = parse_float(input) {
                return Resolved::Float(f);
            }
        }
        'D' | 'S' => {
            if (tag.is_empty() || tag == TIMESTAMP) && is_timestamp(input) {
                return Resolved::Timestamp;
            }
            let plain = input.replace('_', "");
            if let Some(v) = parse_int(&plain, 0) {
                return Resolved::Int(v);
            }
            if let Some(v) = parse_uint(&plain, 0) {
                return Resolved::Uint(v);
            }
            if let Some(f) = parse_float(&plain) {
                return Resolved::Float(f);
            }
            for (prefix, base) in [("0b", 2), ("0o", 8)] {
                if let Some(digits) = plain.strip_prefix(prefix) {
                    if let Some(v) = parse_int(digits, base) {
                        return Resolved::Int(v);
                    }
                    if let Some(v) = parse_uint(digits, base) {
                        return Resolved::Uint(v);
                    }
                } else if let Some(digits) = plain.strip_prefix(&format!("-{prefix}"))
                    && let Some(v) = parse_int(&format!("-{digits}"), base)
                {
                    return Resolved::Int(v);
                }
            }
        }
        _ => {}
    }
    Resolved::Str(input.to_string())
}

/// Go's `strconv.ParseUint(s, base, 64)` for base 0 (a 0x, 0o, 0b or 0
/// prefix picks it), 2 or 8; no underscores (the caller removed them).
fn parse_uint(s: &str, base: u32) -> Option<u64> {
    let (digits, base) = if base == 0 {
        let b = s.as_bytes();
        match (b.first(), b.get(1)) {
            (Some(b'0'), Some(b'x' | b'X')) => (&s[2..], 16),
            (Some(b'0'), Some(b'o' | b'O')) => (&s[2..], 8),
            (Some(b'0'), Some(b'b' | b'B')) => (&s[2..], 2),
            (Some(b'0'), Some(_)) => (&s[1..], 8),
            _ => (s, 10),
        }
    } else {
        (s, base)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(base)) {
        return None;
    }
    u64::from_str_radix(digits, base).ok()
}

/// Go's `strconv.ParseInt(s, base, 64)`: an optional sign, then
/// `parse_uint`, within i64's range.
fn parse_int(s: &str, base: u32) -> Option<i64> {
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let u = parse_uint(rest, base)?;
    if neg {
        0i64.checked_sub_unsigned(u)
    } else {
        i64::try_from(u).ok()
    }
}

/// Go's `strconv.ParseFloat(s, 64)` on the decimal forms yaml.v3 lets it
/// see (`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`); None for
/// other text and for values out of range (Go's ErrRange).
fn parse_float(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    let int_digits = digits(&mut i);
    if b.get(i) == Some(&b'.') {
        i += 1;
        let frac = digits(&mut i);
        if int_digits == 0 && frac == 0 {
            return None;
        }
    } else if int_digits == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    let f: f64 = s.parse().ok()?;
    f.is_finite().then_some(f)
}

/// Whether yaml.v3 reads `s` as a timestamp: Go's `time.Parse` with one of
/// "2006-1-2T15:4:5.999999999Z07:00" (T or t), "2006-1-2 15:4:5.999999999"
/// or "2006-1-2".
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    // Go's getnum: one or two digits.
    fn num(b: &[u8], i: &mut usize) -> Option<u32> {
        let first = *b.get(*i).filter(|c| c.is_ascii_digit())?;
        *i += 1;
        let mut v = u32::from(first - b'0');
        if let Some(&c) = b.get(*i).filter(|c| c.is_ascii_digit()) {
            v = v * 10 + u32::from(c - b'0');
            *i += 1;
        }
        Some(v)
    }
    let lit = |i: &mut usize, c: u8| {
        let ok = b.get(*i) == Some(&c);
        *i += usize::from(ok);
        ok
    };
    let year: u32 = s[..4].parse().unwrap_or(0);
    let mut i = 5;
    let date = (|| {
        let month = num(b, &mut i)?;
        if !lit(&mut i, b'-') {
            return None;
        }
        let day = num(b, &mut i)?;
        Some((month, day))
    })();
    let Some((month, day)) = date else {
        return false;
    };
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    if day < 1 || day > days {
        return false;
    }
    if i == b.len() {
        return true;
    }
    // The time: after T or t (a zone required), or after spaces (none).
    let zoned = match b[i] {
        b'T' | b't' => {
            i += 1;
            true
        }
        b' ' => {
            while b.get(i) == Some(&b' ') {
                i += 1;
            }
            false
        }
        _ => return false,
    };
    let time = (|| {
        let h = num(b, &mut i)?;
        lit(&mut i, b':').then_some(())?;
        let m = num(b, &mut i)?;
        lit(&mut i, b':').then_some(())?;
        let sec = num(b, &mut i)?;
        (h < 24 && m < 60 && sec < 60).then_some(())
    })();
    if time.is_none() {
        return false;
    }
    if matches!(b.get(i), Some(b'.' | b',')) && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i += 1;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
    }
    if !zoned {
        return i == b.len();
    }
    match b.get(i) {
        Some(b'Z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            let z = &b[i..];
            z.len() == 6
                && z[1..3].iter().all(u8::is_ascii_digit)
                && z[3] == b':'
                && z[4..6].iter().all(u8::is_ascii_digit)
                && (z[1] - b'0') * 10 + (z[2] - b'0') <= 24
                && (z[4] - b'0') * 10 + (z[5] - b'0') <= 60
        }
        _ => false,
    }
}

/// Go's `base64.StdEncoding.DecodeString`: padded standard base64, line
/// breaks ignored.
pub(crate) fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let chars: Vec<u8> = s.bytes().filter(|c| !matches!(c, b'\r' | b'\n')).collect();
    if !chars.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(chars.len() / 4 * 3);
    for (n, quad) in chars.chunks(4).enumerate() {
        let last = n + 1 == chars.len() / 4;
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut v = 0u32;
        for &c in &quad[..4 - pad] {
            v = v << 6 | value(c)?;
        }
        v <<= 6 * pad as u32;
        let bytes = [(v >> 16) as u8, (v >> 8) as u8, v as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}
