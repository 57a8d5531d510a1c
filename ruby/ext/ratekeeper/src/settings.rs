//! Ruby values to the core's options (`ratekeeper_core::settings`): the
//! core names the options, their kinds, defaults and checks; this converts.
//! `Limiter.new(rules, **options)` passes its options here as one Hash.

use crate::errors::{config_error, to_ruby, type_error};
use magnus::{prelude::*, Error, Float, Integer, RHash, RString, Ruby, Symbol, Value};
use ratekeeper_core::settings::{Kind, OptionValue, Settings};

fn class_name(value: Value) -> String {
    // SAFETY: the class name is copied out at once.
    unsafe { value.classname() }.into_owned()
}

/// An option name: a Symbol or a String.
pub fn name_of(ruby: &Ruby, key: Value) -> Result<String, Error> {
    if let Some(symbol) = Symbol::from_value(key) {
        return Ok(symbol.name()?.into_owned());
    }
    RString::from_value(key)
        .map(|s| s.to_string())
        .transpose()?
        .ok_or_else(|| {
            type_error(
                ruby,
                format!("option names are Symbols, not {}", class_name(key)),
            )
        })
}

/// `value` as the option `name` takes it, or a `TypeError` saying what it takes.
pub fn option_value(ruby: &Ruby, name: &str, value: Value) -> Result<OptionValue, Error> {
    let kind = Settings::kind(name).map_err(|e| to_ruby(ruby, e))?;
    let wrong = || {
        type_error(
            ruby,
            format!(
                "{name} must be {}, not {}",
                kind.expected(),
                class_name(value)
            ),
        )
    };
    Ok(match kind {
        Kind::Text => {
            if let Some(symbol) = Symbol::from_value(value) {
                OptionValue::Text(symbol.name()?.into_owned())
            } else if let Some(text) = RString::from_value(value) {
                OptionValue::Text(text.to_string()?)
            } else {
                return Err(wrong());
            }
        }
        Kind::Seconds => {
            if let Some(f) = Float::from_value(value) {
                OptionValue::Seconds(f.to_f64())
            } else if let Some(i) = Integer::from_value(value) {
                OptionValue::Seconds(i.to_i64().map(|v| v as f64).unwrap_or(f64::INFINITY))
            } else {
                return Err(wrong());
            }
        }
        Kind::Count => match Integer::from_value(value) {
            Some(_) => match i128::try_convert(value) {
                Ok(n) => OptionValue::Count(n),
                Err(_) => {
                    return Err(config_error(
                        ruby,
                        format!("invalid {name} {}: too large", value.inspect()),
                    ))
                }
            },
            None => return Err(wrong()),
        },
        Kind::Flag if value.is_kind_of(ruby.class_true_class()) => OptionValue::Flag(true),
        Kind::Flag if value.is_kind_of(ruby.class_false_class()) => OptionValue::Flag(false),
        Kind::Flag => return Err(wrong()),
        Kind::Tiers => OptionValue::Tiers(tiers(ruby, value)?),
    })
}

/// Tiers from a Hash of name to rules.
fn tiers(ruby: &Ruby, value: Value) -> Result<Vec<(String, ratekeeper_core::RuleSet)>, Error> {
    if value.is_nil() {
        return Ok(Vec::new());
    }
    let hash = RHash::from_value(value).ok_or_else(|| {
        type_error(
            ruby,
            format!(
                "tiers must be a Hash of tier name to rules, not {}",
                class_name(value)
            ),
        )
    })?;
    let mut out = Vec::new();
    hash.foreach(|name: Value, rules: Value| {
        out.push((name_of(ruby, name)?, crate::types::rule_set(ruby, rules)?));
        Ok(magnus::r_hash::ForEach::Continue)
    })?;
    Ok(out)
}

/// Settings from a Hash of options (Symbol or String keys); each not given,
/// or nil, keeps the core's default (as None does in Python); an unknown one
/// is a `ConfigurationError`.
pub fn from_hash(ruby: &Ruby, options: RHash) -> Result<Settings, Error> {
    let mut settings = Settings::default();
    let mut pairs: Vec<(String, Value)> = Vec::new();
    options.foreach(|key: Value, value: Value| {
        pairs.push((name_of(ruby, key)?, value));
        Ok(magnus::r_hash::ForEach::Continue)
    })?;
    let mut values = Vec::new();
    for (name, value) in &pairs {
        if value.is_nil() {
            Settings::kind(name).map_err(|e| to_ruby(ruby, e))?; // nil: the default, of a known option
            continue;
        }
        values.push((name.as_str(), option_value(ruby, name, *value)?));
    }
    for warning in settings.set_all(values).map_err(|e| to_ruby(ruby, e))? {
        deprecated(ruby, &warning)?;
    }
    Ok(settings)
}

/// Shows `warning` as Ruby shows a deprecation (`Warning[:deprecated]`
/// decides whether it is printed).
pub fn deprecated(ruby: &Ruby, warning: &str) -> Result<(), Error> {
    let options = ruby.hash_new();
    options.aset(ruby.to_symbol("category"), ruby.to_symbol("deprecated"))?;
    let _: Value = ruby
        .module_kernel()
        .funcall("warn", (warning, magnus::KwArgs(options)))?;
    Ok(())
}

/// `Ratekeeper.check_option(name, value)`: checks one option of
/// `Limiter.new` as the limiter would, without building one.
fn check_option(ruby: &Ruby, name: Value, value: Value) -> Result<(), Error> {
    let name = name_of(ruby, name)?;
    if value.is_nil() {
        return Settings::kind(&name)
            .map(|_| ())
            .map_err(|e| to_ruby(ruby, e)); // nil: the default
    }
    let value = option_value(ruby, &name, value)?;
    for warning in Settings::default()
        .set_all(vec![(name.as_str(), value)])
        .map_err(|e| to_ruby(ruby, e))?
    {
        deprecated(ruby, &warning)?;
    }
    Ok(())
}

/// Defines `Ratekeeper.check_option`, `Ratekeeper::DEFAULTS` and
/// `Ratekeeper::RENAMED_OPTIONS` (an option's old name to its name now).
pub fn init(ruby: &Ruby, module: magnus::RModule) -> Result<(), Error> {
    module.define_singleton_method("check_option", magnus::function!(check_option, 2))?;
    let defaults = crate::plain::to_hash(ruby, &Settings::defaults())?;
    defaults.freeze();
    module.const_set("DEFAULTS", defaults)?;
    let renamed = ruby.hash_new();
    for (old, now) in ratekeeper_core::settings::RENAMED {
        renamed.aset(ruby.to_symbol(old), ruby.to_symbol(now))?;
    }
    renamed.freeze();
    module.const_set("RENAMED_OPTIONS", renamed)?;
    Ok(())
}
