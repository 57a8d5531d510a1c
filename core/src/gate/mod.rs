//! The gate: what a request comes to, decided once for every door (WSGI,
//! ASGI, FastAPI, Django, Rack, the edge server's forward auth and Envoy).
//! A door reads its framework's request into [`Facts`] and renders the
//! [`Verdict`]; the order of decision is here and nowhere else:
//!
//! 1. the policy is switched off, or the path is exempt: pass, unmarked;
//! 2. a safelist entry names the request: pass, unmarked; a blocklist
//!    entry: blocked (403);
//! 3. the client address is listed in the store (held in-process, no round
//!    trip but a process's first read of the lists, which `run_async`
//!    awaits): blocked (403) or safelisted (pass, unmarked), its decision
//!    over the rules of the first throttle that applies;
//! 4. fail2ban and allow2ban entries the request matches strike against the
//!    client (its network: an IPv6 client's /64); a fail2ban request is
//!    refused, an allow2ban one when its strike bans;
//! 5. every throttle that applies (hosts, paths, methods, required headers,
//!    and a key the request has) is checked in ONE round trip, each
//!    atomically on its own: each that admits the request counts it; a
//!    throttle with an in-flight rule ("3 concurrent") holds a slot in one
//!    more, given back when the response ends ([`Gate::finish`], in
//!    `ending.rs`) or at once when the request is refused; a throttle with
//!    meters reserves each meter's estimate in one more, all or nothing,
//!    settled by the response's headers when it ends;
//! 6. in throttle order, the first listed key (blocked: 403; safelisted:
//!    pass, unmarked) or denial (429, logged) answers; else the request
//!    passes with the headers of the throttle that has least left.
//!
//! [`Gate::prepare`] (and [`Gate::prepare_envoy`], which maps Envoy's
//! descriptors onto the same throttles) does everything that needs no
//! store; [`Gate::run`] or [`Gate::run_async`] makes the store calls and
//! concludes.

mod ending;
pub mod envoy;
pub mod source;
pub mod spec;
mod verdict;

pub use source::{readable_length, Client, Facts, Source, MAX_BODY};
pub use spec::{
    units_of, BanSpec, Counted, EnvoySpec, ListSpec, MeterSpec, RequestMatch, Spec, ThrottleSpec,
};
pub use verdict::{Checked, Ending, Reason, Verdict};

use crate::controls::List;
use crate::error::Result;
use crate::http::Answer;
use crate::limiter::{BatchItem, Limiter, Listed, Offender, Warden};
use crate::settings::Settings;
use ending::Taken;
use std::sync::Arc;

/// A policy bound to its store: the store's [`Warden`], which screens
/// addresses and counts strikes, and one limiter per throttle made from it
/// (the throttles of a request in one round trip).
pub struct Gate {
    spec: Spec,
    warden: Warden,
    throttles: Vec<Arc<Limiter>>,
}

/// What [`Gate::prepare`] comes to.
#[derive(Debug)]
pub enum Step {
    /// Decided without the store.
    Done(Box<Verdict>),
    /// The store is to be asked: give it to [`Gate::run`] or [`Gate::run_async`].
    Ask(Plan),
}

/// The store calls a request needs, made ready (owning what it needs: it
/// can be awaited apart from the request).
#[derive(Debug)]
pub struct Plan {
    /// Whether the client is still to be screened: the address lists were
    /// not held yet, and their read is the store's to make (awaited by
    /// [`Gate::run_async`]).
    screen: bool,
    /// The first throttle that applies to the request, whose rules a
    /// listed client's decision shows.
    shown: Option<usize>,
    client: Client,
    method: String,
    path: String,
    /// The fail2ban and allow2ban entries to strike, in order.
    strikes: Vec<usize>,
    checks: Vec<Selected>,
}

/// One throttle selected for a request.
#[derive(Debug)]
struct Selected {
    throttle: usize,
    origin: usize,
    key: Vec<u8>,
    cost: u64,
    tier: Option<String>,
    ip: Option<String>,
}

/// A response header as a door tells it to [`Gate::finish`]: its name (in
/// any case) and its value, as bytes.
pub type Header = (Vec<u8>, Vec<u8>);

/// The settings a store is opened with (the rest are per throttle).
fn store_part(settings: &Settings) -> Settings {
    Settings {
        scope: String::new(),
        tiers: Vec::new(),
        ..settings.clone()
    }
}

impl Gate {
    /// Binds `spec` to its store, reusing `previous`'s store and limiters
    /// (their counters and denial caches) where nothing they depend on
    /// changed. Opening a Redis store may wait up to its connect timeout.
    pub fn bind(spec: Spec, previous: Option<&Gate>) -> Result<Gate> {
        let same_store =
            previous.filter(|p| store_part(&p.spec.settings) == store_part(&spec.settings));
        let warden = match same_store {
            Some(p) => p.warden.clone(),
            None => Warden::open(&spec.settings)?,
        };
        let kept: Vec<Arc<Limiter>> = same_store.map_or_else(Vec::new, |p| p.throttles.clone());
        Gate::made(spec, warden, &kept)
    }

    /// A gate on the store of a limiter a door was given (say a WSGI
    /// middleware's `limiter`): that limiter's warden screens and strikes,
    /// the limiter is a throttle's that has its scope, rules and tiers, and
    /// the other throttles get limiters of their own on its store.
    pub fn on_limiter(spec: Spec, limiter: Arc<Limiter>) -> Result<Gate> {
        let warden = limiter.warden().clone();
        Gate::made(spec, warden, &[limiter])
    }

    /// A gate for `spec` on `warden`'s store (say another gate's: the
    /// policies of a Django app's views, on the store of its settings).
    pub fn on_warden(spec: Spec, warden: Warden) -> Result<Gate> {
        Gate::made(spec, warden, &[])
    }

    /// The gate of `spec` on `warden`, each throttle's limiter one of
    /// `kept` that has its scope, rules and tiers, else made anew.
    fn made(spec: Spec, warden: Warden, kept: &[Arc<Limiter>]) -> Result<Gate> {
        let mut throttles = Vec::with_capacity(spec.throttles.len());
        for t in &spec.throttles {
            let same_meters = |l: &Limiter| {
                l.meters().len() == t.meters.len()
                    && (l.meters().iter().zip(&t.meters))
                        .all(|(m, given)| m.name == given.name && m.rules == given.rules)
            };
            let same = kept.iter().find(|l| {
                l.scope() == t.scope
                    && *l.rules() == t.rules
                    && l.tiers() == t.tiers
                    && same_meters(l)
            });
            throttles.push(match same {
                Some(limiter) => limiter.clone(),
                None => {
                    let limiter = warden
                        .limiter(t.rules.clone())
                        .with_scope(&t.scope)?
                        .with_tiers(t.tiers.clone())?;
                    Arc::new(match t.meters.is_empty() {
                        true => limiter,
                        false => limiter.with_meters(
                            (t.meters.iter())
                                .map(|m| (m.name.clone(), m.rules.clone()))
                                .collect(),
                        )?,
                    })
                }
            });
        }
        Ok(Gate {
            spec,
            warden,
            throttles,
        })
    }

    /// The checked policy.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// The warden that screens addresses and counts strikes, on the store
    /// every throttle shares.
    pub fn warden(&self) -> &Warden {
        &self.warden
    }

    /// The throttles' limiters, in order.
    pub fn limiters(&self) -> &[Arc<Limiter>] {
        &self.throttles
    }

    /// Everything about `facts` that needs no store: a verdict, or the
    /// store calls to make.
    pub fn prepare(&self, facts: &dyn Facts) -> Step {
        match self.admit(facts, None, |_| true) {
            Ok(plan) => Step::Ask(plan),
            Err(done) => Step::Done(done),
        }
    }

    /// Steps 1 to 5 for `facts`, over the throttles `counted` lets in: the
    /// verdict when one comes without the store, else the plan. Each check
    /// comes from `origin` (`None`: the throttle's own index).
    fn admit(
        &self,
        facts: &dyn Facts,
        origin: Option<usize>,
        counted: impl Fn(&ThrottleSpec) -> bool,
    ) -> std::result::Result<Plan, Box<Verdict>> {
        let exempt = self.spec.exempt(facts.path())
            || self
                .spec
                .exempt_call
                .is_some_and(|i| facts.call(i).is_some());
        if !self.spec.enabled || !self.warden.clock().limiting() || exempt {
            return Err(Box::new(Verdict::unmarked(Reason::Exempt)));
        }
        if let Some(i) = spec::first_naming(&self.spec.safelists, facts) {
            return Err(Box::new(Verdict::unmarked(Reason::Safelisted(Some(i)))));
        }
        if let Some(i) = spec::first_naming(&self.spec.blocklists, facts) {
            return Err(Box::new(Verdict::blocked(
                Reason::Blocked(Some(i)),
                &self.spec.responses,
                None,
            )));
        }
        let client = Client::of(facts, &self.spec.proxies);
        // the throttles that apply (each asked once: a door's predicate may be a callable)
        let applying: Vec<usize> = (self.spec.throttles.iter().enumerate())
            .filter(|(_, t)| counted(t) && t.applies(facts))
            .map(|(i, _)| i)
            .collect();
        let shown = applying.first().copied();
        let screen = !self.warden.controls_ready();
        if !screen {
            if let Some(done) = self.screened(self.warden.screen(&client.ip), shown) {
                return Err(Box::new(done));
            }
        }
        let strikes = spec::striking(&self.spec.bans, facts);
        // a throttle counts the request against every value of its key (a
        // repeated field's each), all in the one round trip
        let mut checks = Vec::with_capacity(applying.len());
        for i in applying {
            let t = &self.spec.throttles[i];
            let Some(source) = t.key.as_ref() else {
                continue;
            };
            let tier = t.tier_of(facts, &client, &self.spec.proxies);
            for key in source::values_of(source, facts, &client) {
                checks.push(Selected {
                    throttle: i,
                    origin: origin.unwrap_or(i),
                    key,
                    cost: facts.cost(),
                    tier: tier.clone(),
                    ip: Some(client.ip.clone()),
                });
            }
        }
        Ok(Plan {
            screen,
            shown,
            method: facts.method().to_owned(),
            path: facts.path().to_owned(),
            client,
            strikes,
            checks,
        })
    }

    /// A listed client's verdict, when the address lists name it: its
    /// decision over the rules of throttle `shown` (none when no throttle
    /// applies to the request).
    fn screened(&self, listed: Option<Listed>, shown: Option<usize>) -> Option<Verdict> {
        let listed = listed?;
        let decision = shown.map(|i| listed.decision(self.throttles[i].rules()));
        Some(match (listed.list(), listed.allowed()) {
            (List::Safe, _) => Verdict::pass(Reason::Safelisted(None), Answer::default(), decision),
            (_, true) => Verdict::pass(Reason::Shadowed(shown), Answer::default(), decision),
            (_, false) => Verdict::blocked(Reason::Blocked(None), &self.spec.responses, decision),
        })
    }

    /// The name of what `reason` names in the policy, for a door to show:
    /// the safelist, blocklist, fail2ban or allow2ban entry, or the scope of
    /// the throttle whose refusal shadow mode let through.
    pub fn entry_name(&self, reason: Reason) -> Option<&str> {
        match reason {
            Reason::Safelisted(Some(i)) => Some(&self.spec.safelists[i].name),
            Reason::Blocked(Some(i)) => Some(&self.spec.blocklists[i].name),
            Reason::Banned { ban, .. } => Some(&self.spec.bans[ban].rule.name),
            Reason::Shadowed(Some(i)) => Some(&self.spec.throttles[i].scope),
            _ => None,
        }
    }

    /// The scopes of the policy's throttles, in order.
    pub fn scopes(&self) -> Vec<String> {
        self.spec
            .throttles
            .iter()
            .map(|t| t.scope.clone())
            .collect()
    }

    /// Each log the policy's throttles keep a key's usage in, in order: a
    /// throttle's scope and rules, or, for a throttle with meters, each
    /// meter's scope (`SCOPE@METER`) and rules (what a console reads a
    /// key's usage by, `Admin::usage`).
    pub fn throttle_rules(&self) -> Vec<(String, &crate::rule::RuleSet)> {
        let mut out = Vec::with_capacity(self.spec.throttles.len());
        for t in &self.spec.throttles {
            if t.meters.is_empty() {
                out.push((t.scope.clone(), &t.rules));
            }
            for m in &t.meters {
                out.push((crate::meter::meter_scope(&t.scope, &m.name), &m.rules));
            }
        }
        out
    }

    /// The scope of throttle `i` (a verdict's `throttle`, a check's), for a
    /// door to show.
    pub fn scope_of(&self, i: usize) -> &str {
        &self.spec.throttles[i].scope
    }

    /// The client `facts` come from, by the policy's trusted proxies.
    pub fn client(&self, facts: &dyn Facts) -> Client {
        Client::of(facts, &self.spec.proxies)
    }

    /// Counts a strike of the fail2ban or allow2ban entry `name` (as
    /// [`crate::scope_name`] gives it) against `client` (its network, as the
    /// gate's own strikes: an IPv6 client's /64), as an app does after a
    /// failed login; whether that strike banned the client. A name no entry
    /// has is a configuration error naming the entries there are.
    pub fn penalize(&self, name: &str, client: &Client) -> Result<bool> {
        let wanted = crate::keys::scope_name(name);
        let Some(ban) = self.spec.bans.iter().find(|b| b.rule.name == wanted) else {
            let known: Vec<&str> = self
                .spec
                .bans
                .iter()
                .map(|b| b.rule.name.as_str())
                .collect();
            return Err(crate::error::Error::config(format!(
                "no fail2ban or allow2ban entry is named '{wanted}': the policy has {known:?}"
            )));
        };
        let strike = self
            .warden
            .penalize(Offender::Address(&client.key), &ban.rule, "", None)?;
        Ok(strike.banned)
    }

    /// Decides `facts`, making the store calls it needs (blocking).
    pub fn decide(&self, facts: &dyn Facts) -> Result<Verdict> {
        match self.prepare(facts) {
            Step::Done(verdict) => Ok(*verdict),
            Step::Ask(plan) => self.run(plan),
        }
    }

    /// Makes a plan's store calls (blocking) and concludes.
    pub fn run(&self, plan: Plan) -> Result<Verdict> {
        crate::store::one_wait::within(|| {
            if plan.screen {
                let listed = self.warden.screen(&plan.client.ip);
                if let Some(verdict) = self.screened(listed, plan.shown) {
                    return Ok(verdict);
                }
            }
            for &i in &plan.strikes {
                let ban = &self.spec.bans[i];
                let strike = self.warden.penalize(
                    Offender::Address(&plan.client.key),
                    &ban.rule,
                    "",
                    None,
                )?;
                if let Some(verdict) = self.struck(i, strike.banned) {
                    return Ok(verdict);
                }
            }
            if plan.checks.is_empty() {
                return Ok(Verdict::unmarked(Reason::Admitted));
            }
            let taken = self.taken(&plan)?;
            let mut verdict = self.conclude(plan, taken);
            self.given_back(&mut verdict);
            Ok(verdict)
        })
    }

    /// [`Gate::run`], awaiting the store's calls where it has an awaitable
    /// form (Redis).
    #[cfg(feature = "async")]
    pub async fn run_async(&self, plan: Plan) -> Result<Verdict> {
        crate::store::one_wait::within_async(async {
            if plan.screen {
                let listed = self.warden.screen_async(&plan.client.ip).await;
                if let Some(verdict) = self.screened(listed, plan.shown) {
                    return Ok(verdict);
                }
            }
            for &i in &plan.strikes {
                let ban = &self.spec.bans[i];
                let strike = self
                    .warden
                    .penalize_async(Offender::Address(&plan.client.key), &ban.rule, "", None)
                    .await?;
                if let Some(verdict) = self.struck(i, strike.banned) {
                    return Ok(verdict);
                }
            }
            if plan.checks.is_empty() {
                return Ok(Verdict::unmarked(Reason::Admitted));
            }
            let taken = self.taken_async(&plan).await?;
            let mut verdict = self.conclude(plan, taken);
            self.given_back_async(&mut verdict).await;
            Ok(verdict)
        })
        .await
    }

    /// The verdict of ban `i`'s strike, when it ends the request.
    fn struck(&self, i: usize, banned: bool) -> Option<Verdict> {
        self.spec.bans[i].refuses(banned).then(|| {
            Verdict::blocked(
                Reason::Banned { ban: i, banned },
                &self.spec.responses,
                None,
            )
        })
    }

    /// The batch items of the plan's checks whose throttles `batched` lets in.
    fn items<'p>(&'p self, plan: &'p Plan, batched: impl Fn(usize) -> bool) -> Vec<BatchItem<'p>> {
        plan.checks
            .iter()
            .filter(|s| batched(s.throttle))
            .map(|s| BatchItem {
                tier: s.tier.as_deref(),
                ip: s.ip.as_deref(),
                ..BatchItem::new(&self.throttles[s.throttle], &s.key, s.cost)
            })
            .collect()
    }

    /// The verdict from the throttles' decisions, in order. A shadow
    /// throttle's decision is taken in shadow mode: what it would refuse is
    /// reported (the verdict's reason, when nothing else refuses the
    /// request) and logged, never answered, and it shows no headers.
    fn conclude(&self, plan: Plan, taken: Vec<Taken>) -> Verdict {
        let responses = &self.spec.responses;
        let checked: Vec<Checked> = plan
            .checks
            .into_iter()
            .zip(taken)
            .map(|(s, (decision, lease, reservation))| Checked {
                throttle: s.throttle,
                origin: s.origin,
                decision: self.spec.throttles[s.throttle].taken(decision),
                key: s.key,
                cost: s.cost,
                lease,
                reservation,
            })
            .collect();
        let warnings = checked
            .iter()
            .filter_map(|c| c.decision.warning.clone())
            .collect();
        let mut verdict = Verdict {
            warnings,
            ..Verdict::unmarked(Reason::Admitted)
        };
        let log = |c: &Checked| {
            let scope = &self.spec.throttles[c.throttle].scope;
            (self.spec.log_denials)
                .then(|| responses.denial_log(&c.decision, scope, &c.key, &plan.method, &plan.path))
        };
        let mut shown: Option<&Checked> = None;
        let mut shadowed: Option<&Checked> = None;
        for c in &checked {
            let decision = &c.decision;
            if self.spec.throttles[c.throttle].shadow {
                if decision.shadowed() && shadowed.is_none() {
                    shadowed = Some(c);
                }
                continue;
            }
            if decision.is_listed() || !decision.allowed() {
                verdict.reason = Reason::of(decision, c.throttle);
                verdict.decision = Some(decision.clone());
                verdict.throttle = Some(c.throttle);
                if decision.is_listed() {
                    if !decision.allowed() {
                        verdict.ending = Ending::Block;
                        verdict.answer = responses.blocked();
                    }
                } else {
                    verdict.ending = Ending::Deny;
                    verdict.answer = responses.answer(decision);
                    verdict.log = log(c);
                }
                verdict.checked = checked;
                return verdict;
            }
            if shown.is_none_or(|s| {
                decision.binding_state().remaining < s.decision.binding_state().remaining
            }) {
                shown = Some(c);
            }
        }
        if let Some(s) = shown {
            verdict.reason = Reason::of(&s.decision, s.throttle);
            verdict.answer.headers = responses.pass_headers(&s.decision);
            verdict.decision = Some(s.decision.clone());
            verdict.throttle = Some(s.throttle);
        }
        if let Some(c) = shadowed {
            verdict.reason = Reason::Shadowed(Some(c.throttle));
            verdict.log = log(c).map(|line| line.shadowed());
        }
        verdict.awaits_end = checked.iter().any(|c| self.held_for_now(c));
        verdict.checked = checked;
        verdict
    }
}

#[cfg(test)]
mod tests;
