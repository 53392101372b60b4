"""Every --flag an error's hint names is a flag of the command that printed it."""

import re

import pytest

from tokenfleet.cli import build_parser, main
from tokenfleet.errors import UserError

PARSER = build_parser()
COMMANDS = PARSER._subparsers._group_actions[0].choices  # type: ignore[union-attr]


def flags_of(command: str) -> set[str]:
    return {s for a in COMMANDS[command]._actions for s in a.option_strings}


FAILING = {
    "plan": [
        ["--model", "meta-llama/Llama-3.1-405B", "--gpu", "l4"],
        ["--model", "meta-llama/Llama-3.1-405B", "--gpu", "l4", "--tp", "1"],
        ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--tp", "16"],
        ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--tp", "3"],
        ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--max-model-len", "1000"],
        ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--input-tokens", "999999"],
        ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--engine-version", "9.0"],
        ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--quantization", "gptq"],
        ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--concurrency", "0"],
        ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--mem-fraction-static", "0.5"],
        ["--model", "nope/nope", "--gpu", "l4"],
    ],
    "sim": [
        ["--model", "meta-llama/Llama-3.1-405B", "--gpu", "l4"],
        ["--model", "meta-llama/Llama-3.1-405B", "--gpu", "l4", "--tp", "1"],
        ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--tp", "16"],
        ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--engine-version", "9.0"],
        ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--quantization", "gptq"],
        ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--kv-cache-tokens", "100"],
        ["--model", "nope/nope", "--gpu", "l4"],
    ],
}
CASES = [(command, argv) for command, runs in FAILING.items() for argv in runs]


@pytest.mark.parametrize(("command", "argv"), CASES)
def test_hint_flags_exist(command, argv, capsys):
    if command == "sim":
        # The simulator's sizing step, so a case that wrongly passes fails instead of serving.
        from tokenfleet.sim.setup import settings_from_args

        with pytest.raises(UserError) as error:
            settings_from_args(PARSER.parse_args([command, *argv]))
        message = str(error.value)
    else:
        assert main([command, *argv]) == 2
        message = capsys.readouterr().err
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", message))
    assert named <= flags_of(command), (named - flags_of(command), message)
