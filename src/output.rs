//! JSON as the Go build writes it, byte for byte.
//!
//! The Go CLI prints with `json.NewEncoder(w)` and `SetIndent("", "  ")`,
//! and the two builds' outputs are compared as bytes. serde_json differs
//! from Go's encoding/json in four places, each mended here:
//!
//! - floats: Go writes `30`, `1e-7` and `1e+21` where serde_json writes
//!   `30.0`, `1e-7` and `1e21` (see `numfmt::json_float`);
//! - NaN and infinities: Go fails (`json: unsupported value: NaN`) where
//!   serde_json writes `null`;
//! - strings: Go escapes `<`, `>`, `&`, U+2028 and U+2029 as `\u003c`,
//!   `\u003e`, `\u0026`, `\u2028` and `\u2029`, so the output is safe
//!   inside HTML;
//! - everything else (indentation, `[]` and `{}` when empty, `": "`) is
//!   already Go's.
//!
//! What the types must do to print as Go does:
//!
//! - struct fields in Go's declaration order, renamed to Go's json tags
//!   (`#[serde(rename = "...")]`); serde keeps declaration order;
//! - Go's maps as [`JsonMap`] (a `BTreeMap<String, _>`): Go prints map keys
//!   sorted as strings, so a map keyed by numbers is keyed by their text
//!   (`"10"` before `"9"`), as Go does;
//! - `omitempty` as `#[serde(skip_serializing_if = "...")]`;
//! - a Go slice that may be nil as `Option<Vec<_>>` (`None` prints `null`),
//!   one that is never nil as `Vec<_>` (`[]` when empty).

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};

use partita_engine::numfmt;
use serde::Serialize;
use serde::ser;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter, PrettyFormatter};

/// A Go `map[string]V` (or a map keyed by numbers, with their text as the
/// key): its keys print sorted bytewise, as Go sorts them.
pub type JsonMap<V> = BTreeMap<String, V>;

/// Writes `value` as the Go CLI does (`json.Encoder` with
/// `SetIndent("", "  ")`): indented by two spaces, then a newline. Nothing
/// is written when it fails, as in Go, which encodes into a buffer first.
pub fn write_json<T: Serialize + ?Sized>(out: &mut dyn Write, value: &T) -> anyhow::Result<()> {
    let bytes = to_json_pretty(value)?;
    out.write_all(&bytes)?;
    Ok(())
}

/// `value` as `json.Encoder` with `SetIndent("", "  ")` encodes it:
/// indented by two spaces, ending in a newline.
pub fn to_json_pretty<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<Vec<u8>> {
    let mut bytes = encode(value, GoFormatter(PrettyFormatter::with_indent(b"  ")))?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// `value` as `json.Marshal` encodes it: on one line, no newline at the
/// end.
pub fn to_json_compact<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<Vec<u8>> {
    encode(value, GoFormatter(CompactFormatter))
}

fn encode<T: Serialize + ?Sized, F: Formatter>(value: &T, formatter: F) -> anyhow::Result<Vec<u8>> {
    // serde_json writes NaN as null without asking the formatter, so the
    // floats are checked in a walk of their own first.
    value.serialize(FiniteFloats)?;
    let mut bytes = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut bytes, formatter);
    value.serialize(&mut ser)?;
    Ok(bytes)
}

/// serde_json's formatter (compact or pretty) with Go's floats and Go's
/// string escapes.
struct GoFormatter<F>(F);

impl<F: Formatter> Formatter for GoFormatter<F> {
    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        let text = numfmt::json_float(value).map_err(io::Error::other)?;
        w.write_all(text.as_bytes())
    }

    fn write_f32<W: ?Sized + Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        let text = numfmt::json_float32(value).map_err(io::Error::other)?;
        w.write_all(text.as_bytes())
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        // serde_json has already split off the characters JSON requires
        // escaping; these are the ones Go escapes besides.
        let mut rest = fragment;
        while let Some(i) = rest.find(['<', '>', '&', '\u{2028}', '\u{2029}']) {
            w.write_all(&rest.as_bytes()[..i])?;
            let ch = rest[i..]
                .chars()
                .next()
                .expect("find returned a char boundary");
            write!(w, "\\u{:04x}", ch as u32)?;
            rest = &rest[i + ch.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }

    fn write_char_escape<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        // Go's encodeState.string: short forms for these, \u00xx (lower
        // case) for the other control characters.
        let text: &[u8] = match escape {
            CharEscape::Quote => b"\\\"",
            CharEscape::ReverseSolidus => b"\\\\",
            CharEscape::Solidus => b"/",
            CharEscape::Backspace => b"\\b",
            CharEscape::FormFeed => b"\\f",
            CharEscape::LineFeed => b"\\n",
            CharEscape::CarriageReturn => b"\\r",
            CharEscape::Tab => b"\\t",
            CharEscape::AsciiControl(byte) => return write!(w, "\\u{byte:04x}"),
        };
        w.write_all(text)
    }

    // The layout is the wrapped formatter's.

    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }

    fn end_object_key<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_key(w)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// The error of [`FiniteFloats`]: Go's message for a float JSON cannot hold.
#[derive(Debug)]
struct Unsupported(String);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Unsupported(msg.to_string())
    }
}

/// A serializer that writes nothing: it walks a value and fails, with Go's
/// message, at the first NaN or infinity.
#[derive(Clone, Copy)]
struct FiniteFloats;

impl FiniteFloats {
    fn check(value: f64) -> Result<(), Unsupported> {
        match numfmt::json_float(value) {
            Ok(_) => Ok(()),
            Err(e) => Err(Unsupported(e.to_string())),
        }
    }
}

impl ser::Serializer for FiniteFloats {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn serialize_f64(self, v: f64) -> Result<(), Unsupported> {
        Self::check(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Unsupported> {
        Self::check(f64::from(v))
    }

    fn serialize_bool(self, _: bool) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_i128(self, _: i128) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_u128(self, _: u128) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_char(self, _: char) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Unsupported> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), Unsupported> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        value.serialize(self)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self, Unsupported> {
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self, Unsupported> {
        Ok(self)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, Unsupported> {
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self, Unsupported> {
        Ok(self)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self, Unsupported> {
        Ok(self)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Unsupported> {
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self, Unsupported> {
        Ok(self)
    }
}

impl ser::SerializeSeq for FiniteFloats {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        value.serialize(*self)
    }
    fn end(self) -> Result<(), Unsupported> {
        Ok(())
    }
}

impl ser::SerializeTuple for FiniteFloats {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        value.serialize(*self)
    }
    fn end(self) -> Result<(), Unsupported> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for FiniteFloats {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        value.serialize(*self)
    }
    fn end(self) -> Result<(), Unsupported> {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for FiniteFloats {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        value.serialize(*self)
    }
    fn end(self) -> Result<(), Unsupported> {
        Ok(())
    }
}

impl ser::SerializeMap for FiniteFloats {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Unsupported> {
        key.serialize(*self)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        value.serialize(*self)
    }
    fn end(self) -> Result<(), Unsupported> {
        Ok(())
    }
}

impl ser::SerializeStruct for FiniteFloats {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        value.serialize(*self)
    }
    fn end(self) -> Result<(), Unsupported> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for FiniteFloats {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        value.serialize(*self)
    }
    fn end(self) -> Result<(), Unsupported> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // The Go program testdata/json/gen.go encoded the same values into the
    // files compared below.

    #[derive(Serialize)]
    struct Placement {
        profile: &'static str,
        start: i64,
    }

    #[derive(Serialize)]
    struct Inner {
        name: &'static str,
        share: f64,
    }

    #[derive(Serialize)]
    struct Sample {
        text: &'static str,
        escapes: &'static str,
        controls: &'static str,
        unicode: &'static str,
        ints: Vec<i64>,
        uint: u64,
        floats: Vec<f64>,
        float32s: Vec<f32>,
        yes: bool,
        no: bool,
        nil_slice: Option<Vec<String>>,
        empty_slice: Vec<String>,
        empty_map: JsonMap<i64>,
        nil_map: Option<JsonMap<i64>>,
        seeds: JsonMap<f64>,
        #[serde(skip_serializing_if = "JsonMap::is_empty")]
        omitted: JsonMap<i64>,
        #[serde(skip_serializing_if = "str::is_empty")]
        omit_str: &'static str,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        kept: Vec<&'static str>,
        nested: JsonMap<Inner>,
        pointer: Option<Inner>,
        nil_pointer: Option<Inner>,
        layouts: Vec<Vec<Placement>>,
        empties: Vec<Option<Vec<i64>>>,
        any: Vec<serde_json::Value>,
        #[serde(rename = "<key>&")]
        key: JsonMap<&'static str>,
    }

    fn sample() -> Sample {
        let point_one = 0.1;
        Sample {
            text: "plain",
            escapes: r#"<script>alert("x & y")</script> \ / 'q'"#,
            controls: "nul\x00 bel\x07 bs\x08 tab\t lf\n vt\x0b ff\x0c cr\r esc\x1b us\x1f del\x7f",
            unicode: "é ü 日本 🙂 \u{2028} \u{2029} \u{a0} \u{feff}",
            ints: vec![0, -1, 42, i64::MAX, i64::MIN],
            uint: u64::MAX,
            floats: vec![
                0.0,
                -0.0,
                30.0,
                1.5,
                -2.25,
                point_one + 0.2,
                13.370000000000001,
                1e-6,
                1e-7,
                9.99e-7,
                1e20,
                1e21,
                1.5e300,
                5e-324,
                123456789.0,
                1e-100,
                -1e21,
                // 2021816359382793.25, halfway between two shortest forms.
                f64::from_bits(0x431c_bb53_379b_bc25),
            ],
            float32s: vec![0.1, 1e-7, 3.4e38, 16777216.0, 1.5],
            yes: true,
            no: false,
            nil_slice: None,
            empty_slice: vec![],
            empty_map: JsonMap::new(),
            nil_map: None,
            seeds: [
                ("9", 9.5),
                ("10", 10.0),
                ("42", 42.25),
                ("100", 0.0),
                ("-1", -1.0),
                ("a", 1.0),
                ("B", 2.0),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            omitted: JsonMap::new(),
            omit_str: "",
            kept: vec!["x"],
            nested: [
                (
                    "b".to_string(),
                    Inner {
                        name: "bee",
                        share: 0.5,
                    },
                ),
                (
                    "a".to_string(),
                    Inner {
                        name: "ay <&>",
                        share: 1.0,
                    },
                ),
            ]
            .into_iter()
            .collect(),
            pointer: Some(Inner {
                name: "p",
                share: 2.5,
            }),
            nil_pointer: None,
            layouts: vec![
                vec![
                    Placement {
                        profile: "3g.40gb",
                        start: 0,
                    },
                    Placement {
                        profile: "2g.20gb",
                        start: 4,
                    },
                ],
                vec![Placement {
                    profile: "7g.80gb",
                    start: 0,
                }],
            ],
            empties: vec![Some(vec![]), None, Some(vec![1])],
            any: vec![
                json!(null),
                json!(1.0),
                json!("s"),
                json!(true),
                json!({}),
                json!([]),
            ],
            key: [("<k>".to_string(), "&v")].into_iter().collect(),
        }
    }

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).expect("JSON is UTF-8")
    }

    #[test]
    fn indented_output_is_the_go_encoders() {
        let want = include_str!("testdata/json/sample_indent.json");
        assert_eq!(text(to_json_pretty(&sample()).unwrap()), want);
    }

    #[test]
    fn compact_output_is_json_marshal() {
        let want = include_str!("testdata/json/sample_compact.json");
        assert_eq!(text(to_json_compact(&sample()).unwrap()), want);
    }

    #[test]
    fn write_json_writes_the_indented_form() {
        let mut out = Vec::new();
        write_json(&mut out, &sample()).unwrap();
        assert_eq!(text(out), include_str!("testdata/json/sample_indent.json"));
    }

    #[test]
    fn nan_and_infinities_fail_with_gos_message_and_write_nothing() {
        #[derive(Serialize)]
        struct WithNaN {
            name: &'static str,
            share: f64,
        }
        let mut want = include_str!("testdata/json/nan_error.txt").lines();
        let mut check = |value: &dyn erased::Value| {
            let mut out = Vec::new();
            let err = value.write(&mut out).unwrap_err();
            assert_eq!(err.to_string(), want.next().unwrap());
            assert!(out.is_empty(), "wrote {out:?} before failing");
        };
        check(&f64::NAN);
        check(&f64::INFINITY);
        check(&vec![1.0, f64::NEG_INFINITY]);
        let map: JsonMap<WithNaN> = [(
            "x".to_string(),
            WithNaN {
                name: "n",
                share: f64::NAN,
            },
        )]
        .into_iter()
        .collect();
        check(&map);
    }

    /// Lets the NaN test hold values of different types in one closure.
    mod erased {
        pub trait Value {
            fn write(&self, out: &mut Vec<u8>) -> anyhow::Result<()>;
        }
        impl<T: serde::Serialize> Value for T {
            fn write(&self, out: &mut Vec<u8>) -> anyhow::Result<()> {
                super::write_json(out, self)
            }
        }
    }
}
