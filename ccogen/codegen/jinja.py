"""The one Jinja environment: strict, whitespace-tidy, C++-friendly filters (and the
spelling of steps and statements: `cuda`, `hip`, codegen.spell)."""

from __future__ import annotations

from functools import cache

import jinja2

from ccogen._resources import templates_dir
from ccogen.codegen.spell import cuda, hip
from ccogen.codegen.spell.c import cbool


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["cbool"] = cbool
    env.filters["cuda"] = cuda.step  # a step's CUDA text (codegen/spell/cuda.py)
    env.filters["hip"] = hip.stmt  # a mori-sdma statement's HIP text (codegen/spell/hip.py)
    return env


def render(template: str, **context: object) -> str:
    return environment().get_template(template).render(**context)
