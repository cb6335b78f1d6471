//! How deeply a value's JSON nests arrays and objects, read from the value instead of from the
//! text written.
//!
//! Why: a session line nested past the parser's limit would be written fine and lost on the
//! next load, so every line is checked before it is written ([`crate::session::MAX_JSON_DEPTH`]).
//! Scanning each written line for brackets outside strings was 6 % of the instructions of
//! storing a new 200k-token conversation, whose lines are mostly long strings full of escaped
//! quotes. The depth is a property of the value's shape, not of its text: [`depth`] walks the
//! value through its `Serialize` impl (the same one the writer runs) and counts the arrays and
//! objects it opens, never reading a string. The result is exactly what scanning the written
//! line gives (`json_nesting_tests.rs` holds them equal), because it follows serde_json's
//! layout: a struct or map is an object, a sequence, tuple or byte string an array, an enum's
//! newtype variant an object around its value, a tuple or struct variant an object around an
//! array or object.

use serde::Serialize;
use serde::ser;

/// How many levels of arrays and objects `value` nests when written as JSON (0 for a scalar).
/// Asked of values the writer has written: one it refuses (a map key that is not a string) is
/// the writer's error first.
pub(crate) fn depth<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut probe = Probe::default();
    // The probe never fails on its own; a value's `Serialize` impl may, and then what was
    // measured before it is the answer.
    let _ = value.serialize(&mut probe);
    probe.deepest
}

/// The walk's state: the arrays and objects open now, and the most open at once so far.
#[derive(Debug, Default)]
struct Probe {
    open: usize,
    deepest: usize,
}

impl Probe {
    fn enter(&mut self, levels: usize) {
        self.open += levels;
        self.deepest = self.deepest.max(self.open);
    }

    fn leave(&mut self, levels: usize) {
        self.open -= levels;
    }
}

/// The error a value's own `Serialize` impl may raise; the probe raises none.
#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the value refused to be serialised")
    }
}

impl std::error::Error for Stop {}

impl ser::Error for Stop {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Stop
    }
}

/// A compound value being walked, and how many levels it opened.
struct Open<'a> {
    probe: &'a mut Probe,
    levels: usize,
}

impl<'a> Open<'a> {
    fn new(probe: &'a mut Probe, levels: usize) -> Self {
        probe.enter(levels);
        Self { probe, levels }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        value.serialize(&mut *self.probe)
    }

    fn end(self) -> Result<(), Stop> {
        self.probe.leave(self.levels);
        Ok(())
    }
}

impl<'a> ser::Serializer for &'a mut Probe {
    type Ok = ();
    type Error = Stop;
    type SerializeSeq = Open<'a>;
    type SerializeTuple = Open<'a>;
    type SerializeTupleStruct = Open<'a>;
    type SerializeTupleVariant = Open<'a>;
    type SerializeMap = Open<'a>;
    type SerializeStruct = Open<'a>;
    type SerializeStructVariant = Open<'a>;

    fn serialize_bool(self, _: bool) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_i128(self, _: i128) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_u128(self, _: u128) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_f32(self, _: f32) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_f64(self, _: f64) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_char(self, _: char) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Result<(), Stop> {
        Ok(())
    }
    /// Written as an array of numbers.
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Stop> {
        self.enter(1);
        self.leave(1);
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Stop> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        value.serialize(self)
    }
    /// Written as `{"Variant":value}`.
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        let mut open = Open::new(self, 1);
        open.element(value)?;
        open.end()
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Open<'a>, Stop> {
        Ok(Open::new(self, 1))
    }
    fn serialize_tuple(self, _: usize) -> Result<Open<'a>, Stop> {
        Ok(Open::new(self, 1))
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Open<'a>, Stop> {
        Ok(Open::new(self, 1))
    }
    /// Written as `{"Variant":[…]}`.
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Open<'a>, Stop> {
        Ok(Open::new(self, 2))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Open<'a>, Stop> {
        Ok(Open::new(self, 1))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Open<'a>, Stop> {
        Ok(Open::new(self, 1))
    }
    /// Written as `{"Variant":{…}}`.
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Open<'a>, Stop> {
        Ok(Open::new(self, 2))
    }
}

/// The compound kinds whose elements come without names: each element is walked, and the end
/// closes what the start opened.
macro_rules! elements {
    ($($kind:ident :: $method:ident),*) => {$(
        impl ser::$kind for Open<'_> {
            type Ok = ();
            type Error = Stop;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
                self.element(value)
            }
            fn end(self) -> Result<(), Stop> {
                Open::end(self)
            }
        }
    )*};
}

elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// The compound kinds whose fields are named (a key written as a string nests nothing).
macro_rules! fields {
    ($($kind:ident),*) => {$(
        impl ser::$kind for Open<'_> {
            type Ok = ();
            type Error = Stop;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                _: &'static str,
                value: &T,
            ) -> Result<(), Stop> {
                self.element(value)
            }
            fn end(self) -> Result<(), Stop> {
                Open::end(self)
            }
        }
    )*};
}

fields!(SerializeStruct, SerializeStructVariant);

impl ser::SerializeMap for Open<'_> {
    type Ok = ();
    type Error = Stop;
    /// A key is written as a string (the writer refuses any other before the depth is asked),
    /// so it nests nothing.
    fn serialize_key<T: Serialize + ?Sized>(&mut self, _: &T) -> Result<(), Stop> {
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        self.element(value)
    }
    fn end(self) -> Result<(), Stop> {
        Open::end(self)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "json_nesting_tests.rs"]
mod tests;
