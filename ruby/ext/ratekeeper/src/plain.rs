//! The core's plain values (see `ratekeeper_core::plain`) as Ruby values:
//! maps as Hashes with Symbol keys (window seconds as Floats), lists as Arrays.

use magnus::{value::ReprValue, Error, IntoValue, RHash, Ruby, Value};
use ratekeeper_core::plain::{Key, Plain};

/// `plain` as a Ruby value.
pub fn to_ruby(ruby: &Ruby, plain: &Plain) -> Result<Value, Error> {
    Ok(match plain {
        Plain::Null => ruby.qnil().as_value(),
        Plain::Bool(b) => b.into_value_with(ruby),
        Plain::Int(n) => n.into_value_with(ruby),
        Plain::Float(f) => f.into_value_with(ruby),
        Plain::Text(text) => text.as_str().into_value_with(ruby),
        Plain::Map(fields) => {
            let hash = ruby.hash_new();
            for (key, value) in fields {
                let value = to_ruby(ruby, value)?;
                match key {
                    Key::Name(name) => hash.aset(ruby.to_symbol(name), value)?,
                    Key::Seconds(s) => hash.aset(*s, value)?,
                }
            }
            hash.as_value()
        }
        Plain::List(items) => {
            let array = ruby.ary_new_capa(items.len());
            for item in items {
                array.push(to_ruby(ruby, item)?)?;
            }
            array.as_value()
        }
    })
}

/// `plain`, a map, as a Hash.
pub fn to_hash(ruby: &Ruby, plain: &Plain) -> Result<RHash, Error> {
    let value = to_ruby(ruby, plain)?;
    RHash::from_value(value).ok_or_else(|| Error::new(ruby.exception_type_error(), "not a map"))
}
