"""The token client's tokenizer check at start-up: the server's ``/tokenize`` (the
simulator's, in vLLM's and llama.cpp's shapes) against the local tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.simtok import build_sim_tokenizer
from helpers import ADMIN_TOKEN
from rolltap.clients.tokenizer_check import PROBE, tokenize_body
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.errors import TokenizerMismatchError
from rolltap.gateway import Gateway
from rolltap.sim import SimConfig, Simulator
from rolltap.sim.vocab import VOCAB

APIS = ["vllm", "llamacpp", "vllm-generate", "sglang"]


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    return build_sim_tokenizer(tmp_path / "tok")


def _gateway(sim: Simulator, tokenizer: Path, api: str) -> Gateway:
    endpoint = EndpointConfig(
        base_url=sim.base_url, model="sim-model", client="tokens", tokenizer=str(tokenizer),
        completions_api=api,
    )  # fmt: skip
    return Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN))


@pytest.mark.parametrize("api", APIS)
async def test_a_server_that_tokenizes_otherwise_fails_ready(api: str, tokenizer_dir: Path) -> None:
    config = SimConfig(tokenize_mismatch_at=7)
    async with Simulator(config) as sim, _gateway(sim, tokenizer_dir, api) as gateway:
        with pytest.raises(TokenizerMismatchError) as caught:
            await gateway.ready()
    err = caught.value
    assert (err.code, err.status) == ("tokenizer_mismatch", 400)
    assert "from id 7 on" in err.message
    assert "sim-model" in err.message and str(tokenizer_dir) in err.message
    ids = VOCAB.encode(PROBE)
    assert str(ids[3:7])[:-1] in err.message  # the ids before the difference are shown


@pytest.mark.parametrize("api", APIS)
async def test_an_agreeing_server_and_one_without_tokenize_are_ready(
    api: str, tokenizer_dir: Path
) -> None:
    for config in (SimConfig(), SimConfig(tokenize=False, tokenize_mismatch_at=0)):
        async with Simulator(config) as sim, _gateway(sim, tokenizer_dir, api) as gateway:
            await gateway.ready()


async def test_the_probe_reads_the_same_in_the_simulator_and_its_tokenizer(
    tokenizer_dir: Path,
) -> None:
    """What the agreeing case stands on: had the probe a word of the simulator's, its
    vocabulary would take it whole and the character-level tokenizer would not."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    assert tok.encode(PROBE, add_special_tokens=False) == VOCAB.encode(PROBE)


def test_each_server_is_asked_in_its_own_shape() -> None:
    def body(api: str) -> dict[str, object]:
        endpoint = EndpointConfig(
            base_url="http://h/v1", model="m", client="tokens", tokenizer="t",
            completions_api=api,
        )  # fmt: skip
        return tokenize_body(endpoint, "x")

    assert body("llamacpp") == {"content": "x", "add_special": False}
    for api in ("vllm", "vllm-generate", "sglang"):
        assert body(api) == {"model": "m", "prompt": "x", "add_special_tokens": False}


async def test_every_replica_is_checked(tokenizer_dir: Path) -> None:
    async with (
        Simulator(SimConfig()) as good,
        Simulator(SimConfig(tokenize_mismatch_at=2)) as bad,
    ):
        endpoint = EndpointConfig(
            replicas=[good.base_url, bad.base_url], model="sim-model", client="tokens",
            tokenizer=str(tokenizer_dir),
        )  # fmt: skip
        async with Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN)) as gateway:
            with pytest.raises(TokenizerMismatchError) as caught:
                await gateway.ready()
    assert bad.base_url in caught.value.message and good.base_url not in caught.value.message
