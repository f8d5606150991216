"""The endpoint's per-request search settings (the `seed_tot` extension): the second round of
chains can be turned off or retuned per request, and a bad value names its option."""

import pytest

from seed_tot.cli.api_server.catalog import ModelEntry, OptionError, request_config
from seed_tot.search import SearchConfig, SelfConsistency

ENTRY = ModelEntry("gsm8k/self-consistency", "gsm8k", SelfConsistency,
                   SearchConfig(escalate_samples=4, escalate_below=0.7), default=True)


def configured(**extension) -> SearchConfig:
    return request_config(ENTRY, seed=0, temperature=None, top_p=None, max_tokens=None, extension=extension)


def test_a_request_sets_the_second_round():
    assert configured().escalate_samples == 4
    assert configured(escalate_samples=0).escalate_samples == 0
    assert configured(escalate_below=0.5).escalate_below == 0.5


@pytest.mark.parametrize("extension, param", [
    ({"escalate_below": 1.5}, "seed_tot.escalate_below"),
    ({"escalate_samples": -1}, "seed_tot.escalate_samples"),
    ({"escalate_from": "chains"}, "seed_tot.escalate_from"),  # not a request option
])
def test_a_bad_second_round_option_names_itself(extension, param):
    with pytest.raises(OptionError) as caught:
        configured(**extension)
    assert caught.value.param == param
