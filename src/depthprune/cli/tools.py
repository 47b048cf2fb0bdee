"""``depthprune build``, ``measure`` and ``rehearsal``: the tools that make the shipped assets and
measure the machine and the models, once ten ``python -m`` entry points.

Each tool module keeps its logic and exposes ``add_arguments(parser)`` and ``run(args) -> int``;
this module only names them. A tool's module is imported only when its command is parsed
(:class:`depthprune.cli.tools.ToolParser`): ``depthprune --help`` imports none, and ``depthprune measure device`` runs
where lm-eval and datasets are absent (the device machine), since only its own module loads.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

#: group -> command -> (module, one-line help). Every former ``python -m`` tool is exactly one command.
TOOLS: dict[str, dict[str, tuple[str, str]]] = {
    "build": {
        "tiny": ("depthprune.tiny.build", "the tiny family: corpus, tokenizer, fixtures, models, their check"),
        "real": ("depthprune.cli.build_real", "the real profile's frozen text splits and tasks from Python's docs"),
        "wordnet-tasks": ("depthprune.builders.wordnet.tasks", "the real profile's WordNet multiple-choice tasks"),
        "pool": ("depthprune.builders.calibration_pool", "the real profile's enlarged calibration pool"),
        "task-baselines": ("depthprune.builders.task_baselines", "the frozen model-free baselines of every shipped task"),
        "healing": ("depthprune.builders.healing_text", "the tiny and real profiles' frozen healing text (LoRA after pruning)"),
    },
    "measure": {
        "device": ("depthprune.plan.device_check", "this machine's throughput on the suite's own phases "
                                                   "(throughput.json for depthprune plan)"),
        "card": ("depthprune.cards.measure", "a real model's card: dense tasks, margins, single-removal sweeps"),
        "wordnet-accuracy": ("depthprune.cards.wordnet_accuracy", "a real model's dense accuracy on the WordNet tasks"),
        "calibration-curve": ("depthprune.experiments.calibration_curve",
                              "how the removed set settles as the calibration sample grows"),
        "healing-curve": ("depthprune.experiments.healing_curve",
                          "what a heal recovers against its token budget; the budget a grid's heals use"),
        "healing-reference": ("depthprune.healing.reference", "CI's heal of one tiny set, as its stored reference"),
        "healing-band": ("depthprune.healing.band_heals", "how far CI's heal moves on other float32 kernels: its band "
                                                    "for a pair of kernel classes"),
        "rivals": ("depthprune.grid.measure_rivals", "the rival answers of cells decided inside a rounding band, "
                                             "found and evaluated (for REPORT's re-judge)"),
    },
}

#: Tools whose whole docstring is their ``--help`` description (a list of stages), not its first paragraph.
FULL_DOC = frozenset({"depthprune.tiny.build"})

#: The group helps ``depthprune --help`` shows.
GROUP_HELP = {
    "build": "make the shipped assets (tiny family, real profile data and tasks, calibration pool, baselines, healing text)",
    "measure": "measure this machine or a real model (throughput, model cards, accuracies, calibration and healing curves)",
}

#: ``depthprune rehearsal build|env|run``: the paper grid against stand-ins built by code.
REHEARSAL = ("depthprune.rehearsal.command", "the paper grid on CPU, offline, against stand-ins built by code")


class ToolParser(argparse.ArgumentParser):
    """A tool's parser that imports its module and adds its options when it first parses: the
    module's docstring (first paragraph, or all of it for :data:`depthprune.cli.tools.FULL_DOC`) is its description."""

    tool_module: str = ""
    tool_label: str = ""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        if self.tool_module:
            module, self.tool_module = importlib.import_module(self.tool_module), ""
            doc = module.__doc__ or self.description or ""
            self.description = doc if module.__name__ in FULL_DOC else doc.split("\n\n")[0]
            module.add_arguments(self)
            self.set_defaults(func=module.run, label=self.tool_label)
        return super().parse_known_args(args, namespace)


def _add_tool(sub: Any, name: str, module: str, help_text: str, label: str) -> None:
    """One tool's parser, its options still in its module (added when the command is parsed)."""
    p = sub.add_parser(name, help=help_text, description=help_text,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    assert isinstance(p, ToolParser), "the subparsers must be made with parser_class=ToolParser"
    p.tool_module, p.tool_label = module, label


def register(sub: Any) -> None:
    """Add the ``build`` and ``measure`` groups and ``rehearsal`` to the ``depthprune`` subparsers ``sub``
    (made with ``parser_class=ToolParser``, as :func:`depthprune.cli.build_parser` does)."""
    for group, tools in TOOLS.items():
        g = sub.add_parser(group, help=GROUP_HELP[group], description=GROUP_HELP[group])
        commands = g.add_subparsers(dest=f"{group}_command", required=True, metavar="{" + ",".join(tools) + "}",
                                    parser_class=ToolParser)
        for name, (module, help_text) in tools.items():
            _add_tool(commands, name, module, help_text, f"{group} {name}")
    _add_tool(sub, "rehearsal", *REHEARSAL, "rehearsal")
