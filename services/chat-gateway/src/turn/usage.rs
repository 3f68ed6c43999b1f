//! A turn's token usage: the runner's counts, per model call and per run,
//! carried into the gateway's `Usage`, and the runs of a paused turn summed.
//! Every count goes through here (prompt, output, and their parts: cache
//! reads, cache writes, reasoning; the cost and its currency), so none is
//! dropped on the way.

use parley_proto::{gateway::v1 as gw, runner::v1 as runner};

/// Adds one model call's usage (a runner `usage` event) to the turn's:
/// its tokens, one call, and the model when the runner names it.
pub fn add_call(total: &mut gw::Usage, call: &runner::Usage) {
    add_tokens(total, &tokens(call));
    total.model_calls = total.model_calls.saturating_add(1);
    if let Some(model) = &call.model
        && !model.model.is_empty()
    {
        total.model.clone_from(&model.model);
    }
}

/// Takes the runner's total of a run (its `finished` or `input_required`):
/// its token counts replace the calls' sum seen so far.
pub fn take_run_total(total: &mut gw::Usage, run: &runner::Usage) {
    let counted = tokens(run);
    total.input_tokens = counted.input_tokens;
    total.output_tokens = counted.output_tokens;
    total.cached_input_tokens = counted.cached_input_tokens;
    total.cache_write_tokens = counted.cache_write_tokens;
    total.reasoning_tokens = counted.reasoning_tokens;
    total.cost_micros = counted.cost_micros;
    take_currency(total, &counted.currency);
}

/// Usage `a` and `b` of one turn's runs (`b` after `a`'s pause), summed;
/// the model calls are the larger count, since a finished run counts the
/// turn's calls from its first (the runner numbers them on across pauses).
pub fn add_runs(a: Option<gw::Usage>, b: Option<gw::Usage>) -> Option<gw::Usage> {
    match (a, b) {
        (None, b) => b,
        (a, None) => a,
        (Some(mut a), Some(b)) => {
            add_tokens(&mut a, &b);
            a.model_calls = a.model_calls.max(b.model_calls);
            if !b.model.is_empty() {
                a.model = b.model;
            }
            Some(a)
        }
    }
}

/// Adds the token counts of `more` to `total` (not the calls or model).
pub fn add_tokens(total: &mut gw::Usage, more: &gw::Usage) {
    total.input_tokens = total.input_tokens.saturating_add(more.input_tokens);
    total.output_tokens = total.output_tokens.saturating_add(more.output_tokens);
    total.cached_input_tokens = total
        .cached_input_tokens
        .saturating_add(more.cached_input_tokens);
    total.cache_write_tokens = total
        .cache_write_tokens
        .saturating_add(more.cache_write_tokens);
    total.reasoning_tokens = total.reasoning_tokens.saturating_add(more.reasoning_tokens);
    total.cost_micros = total.cost_micros.saturating_add(more.cost_micros);
    take_currency(total, &more.currency);
}

/// The currency of a total is its parts' (the runner prices in one); an
/// unpriced part (no currency) leaves it as it is.
fn take_currency(total: &mut gw::Usage, currency: &str) {
    if !currency.is_empty() && total.currency != currency {
        total.currency = currency.to_owned();
    }
}

/// The token counts of a runner usage, as the gateway's.
fn tokens(usage: &runner::Usage) -> gw::Usage {
    gw::Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cached_input_tokens: usage.cached_input_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        reasoning_tokens: usage.reasoning_tokens,
        cost_micros: usage.cost_micros.max(0),
        currency: usage.currency.clone(),
        ..gw::Usage::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(input: u64, cached: u64, written: u64, output: u64, reasoning: u64) -> runner::Usage {
        runner::Usage {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: cached,
            cache_write_tokens: written,
            reasoning_tokens: reasoning,
            // A price of one micro-unit a token.
            cost_micros: i64::try_from(input + output).expect("small"),
            currency: "USD".into(),
            model: Some(runner::ModelRef {
                provider: "anthropic".into(),
                model: "claude-sonnet-4-5".into(),
                parameters: None,
            }),
        }
    }

    #[test]
    fn every_count_of_every_call_is_summed() {
        let mut total = gw::Usage::default();
        add_call(&mut total, &call(2012, 0, 2000, 40, 0));
        add_call(&mut total, &call(2090, 2000, 60, 35, 10));
        add_call(&mut total, &call(2085, 2060, 0, 80, 20));
        assert_eq!(
            total,
            gw::Usage {
                input_tokens: 6187,
                output_tokens: 155,
                model_calls: 3,
                model: "claude-sonnet-4-5".into(),
                cached_input_tokens: 4060,
                cache_write_tokens: 2060,
                reasoning_tokens: 30,
                cost_micros: 2052 + 2125 + 2165,
                currency: "USD".into(),
            }
        );
    }

    #[test]
    fn a_run_total_replaces_the_calls_sum_and_runs_add_across_a_pause() {
        let mut before = gw::Usage::default();
        add_call(&mut before, &call(100, 0, 90, 10, 1));
        take_run_total(&mut before, &call(120, 5, 90, 12, 2));
        assert_eq!(
            (
                before.input_tokens,
                before.cached_input_tokens,
                before.model_calls
            ),
            (120, 5, 1)
        );
        let mut after = gw::Usage::default();
        add_call(&mut after, &call(300, 200, 0, 30, 3));
        after.model_calls = 2;
        let turn = add_runs(Some(before), Some(after)).expect("both runs");
        assert_eq!(
            (
                turn.input_tokens,
                turn.output_tokens,
                turn.cached_input_tokens,
                turn.cache_write_tokens,
                turn.reasoning_tokens,
                turn.model_calls,
                turn.cost_micros,
                turn.currency.as_str(),
            ),
            (420, 42, 205, 90, 5, 2, 132 + 330, "USD")
        );
        // An unpriced run (no currency) keeps the priced one's.
        let unpriced = gw::Usage {
            input_tokens: 1,
            ..gw::Usage::default()
        };
        let turn = add_runs(Some(turn), Some(unpriced)).expect("both runs");
        assert_eq!((turn.cost_micros, turn.currency.as_str()), (462, "USD"));
    }
}
