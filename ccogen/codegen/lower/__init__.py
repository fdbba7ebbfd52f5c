"""Target-independent lowering passes: each a function from the planned ops or steps of
one instance to steps or statements, run in the order a backend lists them (docs/design.md,
"Code generation").  A pass decides; the language's spelling module (`codegen.spell`)
writes every piece of C text.

`mori`: ccoSdma's lowering, ops to call-level statements (`codegen.steps.Stmt`), spelled
by `codegen.spell.hip`.
"""
