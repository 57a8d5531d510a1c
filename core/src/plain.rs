//! Plain values: the shapes the bindings hand to users as dicts and Hashes
//! (an admin entry, an inspection, the switches, counters, the defaults, a
//! decision), defined once here. Each binding has one converter from
//! [`Plain`] to its language's values (`str` keys in Python, Symbols in Ruby).

use crate::admin::{Entry, Inspection};
use crate::audit::Change;
use crate::controls::{Listing, Switches};
use crate::decision::Decision;
use crate::denials::{Denied, Top};
use crate::metrics::Stats;
use crate::store::StoreStats;
use crate::time::seconds;

/// A key of a [`Plain::Map`].
#[derive(Debug, Clone, PartialEq)]
pub enum Key {
    /// A field name.
    Name(&'static str),
    /// A window, in seconds (the keys of `peak_used`).
    Seconds(f64),
}

/// A value as plain data.
#[derive(Debug, Clone, PartialEq)]
pub enum Plain {
    /// None / nil.
    Null,
    /// A boolean.
    Bool(bool),
    /// A whole number.
    Int(u64),
    /// A number (seconds, a multiplier).
    Float(f64),
    /// Text.
    Text(String),
    /// Fields in order.
    Map(Vec<(Key, Plain)>),
    /// Values in order.
    List(Vec<Plain>),
}

impl From<bool> for Plain {
    fn from(value: bool) -> Plain {
        Plain::Bool(value)
    }
}

impl From<u64> for Plain {
    fn from(value: u64) -> Plain {
        Plain::Int(value)
    }
}

impl From<f64> for Plain {
    fn from(value: f64) -> Plain {
        Plain::Float(value)
    }
}

impl From<&str> for Plain {
    fn from(value: &str) -> Plain {
        Plain::Text(value.to_owned())
    }
}

impl<T: Into<Plain>> From<Option<T>> for Plain {
    fn from(value: Option<T>) -> Plain {
        value.map_or(Plain::Null, Into::into)
    }
}

fn map(fields: Vec<(&'static str, Plain)>) -> Plain {
    Plain::Map(
        fields
            .into_iter()
            .map(|(name, value)| (Key::Name(name), value))
            .collect(),
    )
}

/// A listing as `{expires_at, reason}`, plus `kind` when given.
fn listing(listing: &Listing, kind: Option<&'static str>) -> Plain {
    let mut fields = Vec::new();
    if let Some(kind) = kind {
        fields.push(("kind", kind.into()));
    }
    fields.push(("expires_at", seconds(listing.until_ms).into()));
    fields.push(("reason", listing.reason.as_str().into()));
    map(fields)
}

impl Entry {
    /// `{kind, target, tag, network, expires_at, detail, scope}`: `kind` is
    /// safelist, blocklist, tier or override; `target` as text (a key
    /// listed by its tag: the tag); `tag` a key's stored form, what a `tag`
    /// target takes to act on the very key (none for an address or range);
    /// `expires_at` epoch seconds
    /// (none for a tier or override); `detail` the reason, the tier or the
    /// rules; `scope` the scope a key's ban holds in (none: everywhere).
    pub fn plain(&self) -> Plain {
        map(vec![
            ("kind", self.field.name().into()),
            (
                "target",
                Plain::Text(String::from_utf8_lossy(&self.target).into_owned()),
            ),
            ("tag", self.stored().map_or(Plain::Null, Plain::Text)),
            ("network", self.network.into()),
            ("expires_at", self.until_ms.map(seconds).into()),
            ("detail", self.detail.as_str().into()),
            (
                "scope",
                (!self.scope.is_empty())
                    .then_some(self.scope.as_str())
                    .into(),
            ),
        ])
    }
}

impl Inspection {
    /// `{safelist, blocklist, tier, override, address, scope,
    /// scope_blocklist, leases, now}`: each listing `{expires_at, reason}` or none;
    /// `address` (for a key that is an IP) `{kind, expires_at, reason}` or
    /// none; `scope_blocklist` the key's ban in the `scope` asked about;
    /// `leases` its live leases there, each `{id, since, lapse_at}` (seconds).
    pub fn plain(&self) -> Plain {
        let record = &self.record;
        map(vec![
            (
                "safelist",
                record
                    .safe
                    .as_ref()
                    .map_or(Plain::Null, |l| listing(l, None)),
            ),
            (
                "blocklist",
                record
                    .block
                    .as_ref()
                    .map_or(Plain::Null, |l| listing(l, None)),
            ),
            ("tier", record.tier.as_deref().into()),
            (
                "override",
                record
                    .rules
                    .as_ref()
                    .map(|r| r.to_string())
                    .as_deref()
                    .into(),
            ),
            (
                "address",
                self.address
                    .as_ref()
                    .map_or(Plain::Null, |(list, l)| listing(l, Some(list.name()))),
            ),
            (
                "scope",
                (!self.scope.is_empty())
                    .then_some(self.scope.as_str())
                    .into(),
            ),
            (
                "scope_blocklist",
                self.scope_block
                    .as_ref()
                    .map_or(Plain::Null, |l| listing(l, None)),
            ),
            (
                "leases",
                Plain::List(
                    self.leases
                        .iter()
                        .map(|(id, lapse_ms)| {
                            let since = crate::in_flight::taken_at_of(id);
                            map(vec![
                                ("id", id.as_str().into()),
                                ("since", since.map_or(Plain::Null, |ms| seconds(ms).into())),
                                ("lapse_at", seconds(*lapse_ms).into()),
                            ])
                        })
                        .collect(),
                ),
            ),
            ("now", seconds(self.now_ms).into()),
        ])
    }
}

impl Change {
    /// `{at, actor, action, target, scope, detail, reason}`: `at` epoch
    /// seconds; `actor` who made it (none when nobody was named); `action`
    /// block, safelist, unblock, unsafelist, tier, override or switches;
    /// `scope` the scope of a key's ban (none: everywhere).
    pub fn plain(&self) -> Plain {
        let optional = |text: &str| (!text.is_empty()).then(|| text.to_owned()).map(Plain::Text);
        map(vec![
            ("at", seconds(self.at_ms).into()),
            ("actor", optional(&self.actor).unwrap_or(Plain::Null)),
            ("action", self.action.as_str().into()),
            ("target", self.target.as_str().into()),
            ("scope", optional(&self.scope).unwrap_or(Plain::Null)),
            ("detail", self.detail.as_str().into()),
            ("reason", self.reason.as_str().into()),
        ])
    }
}

impl Top {
    /// `{window, keys, addresses, networks, per_minute}`: `keys` as
    /// `{scope, key, tag, count}` (`key` as text, bytes that are not UTF-8
    /// shown as U+FFFD, a hashed key as its tag; `tag` its stored form, what
    /// a `tag` target takes to act on the very key), `addresses` as `{scope, address, count}`,
    /// `networks` as `{scope, network, count}` (an IPv4 /24, an IPv6 /64),
    /// each most denied first (`scope` none for a limiter without one);
    /// `per_minute` as `{at, count}`, oldest first (`at` epoch seconds).
    pub fn plain(&self) -> Plain {
        let rows = |rows: &[Denied], name: &'static str| {
            Plain::List(
                rows.iter()
                    .map(|d| {
                        let mut row = vec![
                            (
                                "scope",
                                (!d.scope.is_empty()).then_some(d.scope.as_str()).into(),
                            ),
                            (name, d.target.as_str().into()),
                        ];
                        if let Some(form) = d.stored() {
                            row.push(("tag", Plain::Text(form)));
                        }
                        row.push(("count", d.count.into()));
                        map(row)
                    })
                    .collect(),
            )
        };
        map(vec![
            ("window", self.window_s.into()),
            ("keys", rows(&self.keys, "key")),
            ("addresses", rows(&self.addresses, "address")),
            ("networks", rows(&self.networks, "network")),
            (
                "per_minute",
                Plain::List(
                    self.per_minute
                        .iter()
                        .map(|&(at, count)| {
                            map(vec![("at", seconds(at).into()), ("count", count.into())])
                        })
                        .collect(),
                ),
            ),
        ])
    }
}

impl Switches {
    /// `{enabled, shadow, multiplier}`.
    pub fn plain(&self) -> Plain {
        map(vec![
            ("enabled", self.enabled.into()),
            ("shadow", self.shadow.into()),
            ("multiplier", self.multiplier.into()),
        ])
    }
}

impl Stats {
    /// The counts by name, and `peak_used`: window seconds to the most units
    /// seen in use in it.
    pub fn plain(&self) -> Plain {
        let mut fields: Vec<(Key, Plain)> = self
            .counts()
            .into_iter()
            .map(|(name, value)| (Key::Name(name), value.into()))
            .collect();
        let peaks = self
            .peak_used
            .iter()
            .map(|&(window_ms, used)| (Key::Seconds(seconds(window_ms)), used.into()))
            .collect();
        fields.push((Key::Name("peak_used"), Plain::Map(peaks)));
        Plain::Map(fields)
    }
}

impl StoreStats {
    /// `{attempts, failures, short_circuits, module_calls, script_calls,
    /// path}`: `path` is the way the next check goes (module, script or memory).
    pub fn plain(&self) -> Plain {
        let mut fields: Vec<(Key, Plain)> = self
            .counts()
            .into_iter()
            .map(|(name, value)| (Key::Name(name), value.into()))
            .collect();
        fields.push((Key::Name("path"), self.path.into()));
        Plain::Map(fields)
    }
}

impl Decision {
    /// The decision as fields: `outcome`, `allowed`, `retry_after`, the
    /// binding rule's `limit`, `remaining`, `reset_after` and `window`, and
    /// `degraded`, `blocked`, `safelisted`, `shadowed`, `cached`, `tier`,
    /// `overridden`, `reason`, and `meter` (the binding rule's, for a
    /// metered limiter).
    pub fn plain(&self) -> Plain {
        let bind = self.binding_state();
        map(vec![
            ("outcome", self.outcome.name().into()),
            ("allowed", self.allowed().into()),
            ("retry_after", self.retry_after_ms.map(seconds).into()),
            ("limit", bind.limit.into()),
            ("remaining", bind.remaining.into()),
            ("reset_after", seconds(bind.reset_after_ms).into()),
            ("window", seconds(bind.window_ms).into()),
            ("degraded", self.degraded().into()),
            ("blocked", self.blocked().into()),
            ("safelisted", self.safelisted().into()),
            ("shadowed", self.shadowed().into()),
            ("cached", self.cached.into()),
            ("tier", self.tier.as_deref().into()),
            ("overridden", self.overridden.into()),
            ("reason", self.reason.as_deref().into()),
            ("meter", self.meter().into()),
        ])
    }
}
