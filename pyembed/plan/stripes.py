"""Stripe execution of a model's operator chains, against the planner.

    executable_chain(graph, first_op)  the longest run of a model's operators
                                       from first_op that the stripe executor takes
    chain_memory(chain, ...)           its stripe arena against the planner's
                                       full-frame arena for the same operators
"""
from dataclasses import dataclass

import numpy as np

from pyembed.errors import ArgumentError, UnsupportedError
from pyembed.kernels.stripe import (DEFAULT_BLOCK, _widths, check_network, compile_network, full_frame_macs,
                                    full_frame_peak_bytes)
from pyembed.model.chain import chain_from_graph
from pyembed.plan import plan_graph


# ---------------------------------------------------------------------------
# Chains of a model's operators (pyembed.kernels.layers.chain_from_graph)

def executable_chain(graph, first_op=0, last_op=None, rounding="double"):
    """The longest LayerChain of graph operators from first_op (at most up
    to last_op) that the stripe executor runs: chain_from_graph, cut back
    while check_network refuses it (a kernel larger than MAX_KERNEL, a
    receptive field larger than the image, more than MAX_LAYERS layers).
    Raises the executor's refusal if not even operator first_op alone runs."""
    chain = chain_from_graph(graph, first_op, last_op, rounding)
    while True:
        try:
            check_network(chain, chain.input_shape)
            return chain
        except (ArgumentError, UnsupportedError) as e:
            if len(chain) == 1:
                raise e from None
        chain = chain_from_graph(graph, first_op, chain.ops[-2], rounding)


@dataclass
class ChainMemory:
    """RAM of a chain of model operators, full-frame against stripes (bytes).

    planned_arena: pyembed.plan's arena for running the operators
      layer by layer on the C graph runtime (input, output, every
      intermediate map and kernel scratch, 16-byte aligned), with
      planned_lower_bound its liveness bound;
    full_frame_peak: the intermediate maps alive at once (input and output
      excluded), the quantity the stripe arena replaces;
    stripe_arena: the C executor's arena query (line stores, temporaries,
      branch stores); with the input and output images the caller keeps,
      stripe_total = stripe_arena + input_bytes + output_bytes."""
    layers: int
    planned_arena: int
    planned_lower_bound: int
    full_frame_peak: int
    input_bytes: int
    output_bytes: int
    stripe_width: int
    block_width: int
    stripe_arena: int
    full_frame_macs: int
    stripe_macs: int

    @property
    def stripe_total(self):
        return self.stripe_arena + self.input_bytes + self.output_bytes

    @property
    def mac_overhead(self):
        return self.stripe_macs / self.full_frame_macs - 1.0 if self.full_frame_macs else 0.0


def chain_memory(chain, stripe_width=None, block_width=DEFAULT_BLOCK, time_limit=2.0):
    """ChainMemory of a LayerChain (stripe_width None: one full-width
    stripe). The planned arena comes from pyembed.plan.plan_graph on the
    chain's operators alone (Graph.subgraph, the chain output as the only
    output); the stripe figures from the executor's queries."""
    shape = chain.input_shape
    net = compile_network(chain, shape)
    out_w = net.output_shape()[1]
    s, b = _widths(out_w if stripe_width is None else stripe_width, block_width)
    sub = chain.graph.subgraph(chain.ops, outputs=[chain.output_tensor])
    planned = plan_graph(sub, time_limit=time_limit)
    return ChainMemory(layers=len(chain), planned_arena=int(planned.arena_size),
                       planned_lower_bound=int(planned.lower_bound),
                       full_frame_peak=full_frame_peak_bytes(chain, shape),
                       input_bytes=int(np.prod(shape)), output_bytes=int(np.prod(chain.output_shape)),
                       stripe_width=s, block_width=b, stripe_arena=net.buffer_size(s, b),
                       full_frame_macs=full_frame_macs(chain, shape), stripe_macs=net.predict_macs(s))


