"""Every registered method passes the method contract (``pnc.methods.checks.check_method``), as
scikit-learn's estimators pass ``check_estimator``; a method that breaks it is named with the
check it fails."""

from typing import ClassVar

import jax.numpy as jnp
import pytest
from test_methods_new_baseline import Jitter
from test_methods_toy import CONFIGS

import pnc.methods as methods
from pnc.methods.checks import CHECKS, CheckSetting, ContractError, check_method
from pnc.predictive import Predictive


@pytest.mark.slow
@pytest.mark.parametrize("method_id", methods.METHOD_IDS)
def test_every_registered_method_passes_the_contract(method_id):
    overrides = dict(CONFIGS[method_id])
    if method_id == "subspace":  # its own run within the checks' 200 steps
        overrides.update(trajectory_steps=200, collect_start=100, collect_every=25, n_snapshots=4)
        overrides.update(rank=3, burn_in=5)
    state = check_method(method_id, CheckSetting(overrides=overrides))
    expected = overrides.get("n_samples") or overrides.get("n_members")
    assert state["n_samples"] == expected
    assert state["run"].spec == methods.get(method_id).training_spec(state["config"])


class ForgetsTheKey(Jitter):
    """Breaks the contract: its samples are not a function of the key alone."""

    id: ClassVar[str] = "forgets_the_key"
    calls: ClassVar[list] = []

    def predict(self, posterior, x, *, key):
        self.calls.append(1)
        pred = super().predict(posterior, x, key=key)
        return Predictive(pred.means + len(self.calls), pred.variances)


class WrongShape(Jitter):
    id: ClassVar[str] = "wrong_shape"

    def predict(self, posterior, x, *, key):
        means = jnp.zeros((2, x.shape[0] + 1, 1))
        return Predictive(means, jnp.ones_like(means))


@pytest.mark.parametrize(
    ("cls", "check"),
    [(ForgetsTheKey, "the same key gave different samples"), (WrongShape, "shapes")],
)
def test_a_method_that_breaks_the_contract_is_named_with_the_check(cls, check):
    methods.register(cls())
    try:
        with pytest.raises(ContractError, match=f"method '{cls.id}', check prediction: {check}"):
            check_method(cls.id, CheckSetting(overrides={"noise": 0.5}))
    finally:
        methods.unregister(cls.id)
    with pytest.raises(ContractError, match="not the method registered under its id"):
        check_method(cls(), CheckSetting())
    assert [c.__name__ for c in CHECKS][0] == "check_declarations"
