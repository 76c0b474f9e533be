"""Replacing a matched chain of operators by one fused operator: the step the
fusion passes (element-wise LUT, LayerNorm, attention) share."""


def splice_fused(graph, absorbed, fused):
    """Put fused where the last of the absorbed operators stood, drop the
    absorbed ones from graph.operators and renumber every operator's index.
    Preparing fused is the caller's part."""
    pos = max(graph.operators.index(o) for o in absorbed)
    gone = {id(o) for o in absorbed}
    new_ops = []
    for i, op in enumerate(graph.operators):
        if i == pos:
            new_ops.append(fused)
        if id(op) not in gone:
            new_ops.append(op)
    graph.operators = new_ops
    for i, op in enumerate(graph.operators):
        op.index = i
