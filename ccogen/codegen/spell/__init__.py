"""How each language spells the device IR: one module per language (`cuda`: the SM
targets' steps, `codegen.steps`; `hip`: mori-sdma's statements and the HIP pieces its
lowering pass, `codegen.lower.mori`, builds them from), and `c`: what both share (literals).
Python decides the text of every step; the templates print it (templates/common/_steps.j2,
templates/mori_sdma/kernels.hip.j2) and hold no kind ladder."""
