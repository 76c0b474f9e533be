"""The option vocabulary every sub-command shares.

    @click.command()
    @model_argument()                 # a path, or a bundled model name (kws, vww, ...), case-insensitive
    @profile_option()                 # --profile NAME|FILE (old spellings -p / --mcu kept, hidden)
    @inputs_option()                  # --inputs FILE.npy|.npz (old spelling --input kept, hidden)

Use these instead of writing the options again, so that `pyembed plan`,
`simulate`, `check`, `schedule` ... spell them the same way. Checks shared by
commands (a float model, a batch where one sample is used, a negative
deadline) are here too; each raises ArgumentError, which the CLI turns into
one line and exit code 2.
"""
import os

import click

from pyembed.errors import ArgumentError

DEFAULT_PROFILE = "stm32f446"


class _AliasOption(click.Option):
    """An option whose first spellings show in --help; the others (old
    names kept working) are accepted but not listed."""

    def __init__(self, param_decls, shown=1, **kw):
        super().__init__(param_decls, **kw)
        self._shown = shown

    def get_help_record(self, ctx):
        opts, secondary = self.opts, self.secondary_opts
        names = [o for o in self.opts if o.startswith("--")][:self._shown] or self.opts[:self._shown]
        self.opts = names
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts, self.secondary_opts = opts, secondary


class ModelPath(click.ParamType):
    """A model file, or the name of a bundled model (see `pyembed model list`)."""
    name = "MODEL"

    def convert(self, value, param, ctx):
        from pyembed.data import bundled_models, resolve_model
        if not isinstance(value, str):
            return value
        path = resolve_model(value)
        # ArgumentError, not click's usage error: the CLI prints it as one line (exit 2)
        if os.path.isdir(path):
            raise ArgumentError(f"MODEL {value}: a directory, not a model file")
        if not os.path.exists(path):
            names = ", ".join(short or stem for short, stem in bundled_models())
            raise ArgumentError(f"MODEL {value}: no such file, and not a bundled model ({names})")
        return path


def model_argument(name="model", **kw):
    return click.argument(name, type=ModelPath(), **kw)


def profile_option(default=DEFAULT_PROFILE, help_extra="", dest="profile"):
    """--profile NAME|FILE; -p and --mcu still work. Names are case-insensitive."""
    return click.option("--profile", "-p", "--mcu", dest, cls=_AliasOption, default=default,
                        show_default=default is not None, metavar="NAME|FILE",
                        help="MCU profile: a bundled part (see 'pyembed profiles'; any case) or a .json file."
                             + (" " + help_extra if help_extra else ""))


def inputs_option(help_text=None):
    """--inputs FILE (.npy one sample or a batch, .npz one array per input); --input still works."""
    return click.option(
        "--inputs", "--input", "inputs_path", cls=_AliasOption, type=click.Path(dir_okay=False), default=None,
        metavar="FILE",
        help=help_text or "Inputs .npy (one sample, or a batch along a new first axis) or .npz (one array per "
                          "model input); integers as they are, floats quantized with the input's scale.")


# -- shared checks ---------------------------------------------------------------------------------

def check_inputs_file(path, option="--inputs"):
    if path is not None and not os.path.isfile(path):
        raise ArgumentError(f"{option} {path}: no such file")
    return path


def require_quantized(graph, command):
    """A float model the runtime cannot execute (float CONV_2D, ...) is not for pyembed's int8
    runtime: say so in one line. One of float32 element-wise operators only
    (pyembed.model.ops.f32) runs."""
    from pyembed.model.support import executable_problems
    ints = [t for t in graph.inputs if graph.tensors[t].dtype is not None
            and graph.tensors[t].dtype.kind in "iu"]
    quantized_ops = any(graph.tensors[o].is_quantized for op in graph.operators for o in op.outputs if o >= 0)
    if not ints and not quantized_ops and executable_problems(graph):
        dt = ", ".join(sorted({str(graph.tensors[t].dtype) for t in graph.inputs}))
        raise ArgumentError(f"{graph.name}: a float model ({dt} input, no quantized tensors); 'pyembed {command}' "
                            f"needs an int8-quantized model (e.g. TFLite full-integer quantization)")


def one_sample(graph, path, option="--inputs"):
    """The single sample in an inputs file (a list per graph input, internal
    layout), or an error when the file holds a batch of several."""
    from pyembed.check.accuracy import load_inputs
    samples = load_inputs(graph, check_inputs_file(path, option))
    if len(samples) != 1:
        raise ArgumentError(f"{option} {path}: holds a batch of {len(samples)} samples; this command runs one "
                            f"(save a single sample, e.g. numpy.save(path, batch[0]))")
    return samples[0]


def check_deadline(deadline_ms, option="--deadline-ms"):
    if deadline_ms is not None and not deadline_ms > 0:
        raise ArgumentError(f"{option}: expected a positive number of milliseconds, got {deadline_ms:g}")
    return deadline_ms


def force_option():
    """--force: an output folder may hold files pyembed did not write (or that
    were changed since) at the paths it writes; they are replaced. Without it
    they are refused (pyembed.codegen.outdir)."""
    return click.option("--force", is_flag=True,
                        help="Replace files in the output folder that pyembed did not write (or that changed since "
                             "it wrote them); without it they are refused (exit 2). Nothing else is removed.")


def attention_option():
    """--attention auto|none|tflm|stream: the transformer passes before anything
    else (pyembed.passes.transformer.fuse_transformer: LayerNorm and
    element-wise chains fused, attention in that numeric mode); auto (the
    default) = tflm, which changes no output bit and fuses only what it finds;
    none = the graph as imported."""
    return click.option("--attention", "attention", type=click.Choice(list(ATTENTION_CHOICES)), default="auto",
                        show_default=True,
                        help="Fuse transformer blocks first: LayerNorm and GELU chains, and attention as one "
                             "streaming operator, bit-exact with TFLM (tflm; auto, the default, is tflm wherever "
                             "such a chain is found) or with >=24-bit probabilities (stream); none keeps the "
                             "graph as imported.")


ATTENTION_CHOICES = ("auto", "none", "tflm", "stream")


def attention_mode(attention):
    """The fuse_transformer mode of an --attention choice (auto -> tflm), or
    None for none."""
    if attention in (None, "none"):
        return None
    return "tflm" if attention == "auto" else attention


def apply_attention(graph, attention):
    """Run the transformer passes on graph for --attention; returns the report lines."""
    mode = attention_mode(attention)
    if mode is None:
        return []
    from pyembed.passes.transformer import fuse_transformer
    lines = fuse_transformer(graph, attention=mode)
    if attention == "auto":
        from pyembed.passes.transformer import auto_attention_lines
        return auto_attention_lines(lines)
    return lines


# -- the compiler pipeline (pyembed.passes.pipeline), shared by plan, simulate and firmware ---------

STRATEGIES = ("none", "layers", "stripes", "auto")


def strategy_option(flag="--strategy", dest="pipeline", help_extra=""):
    """--strategy none|layers|stripes|auto: the compiler pipeline between import
    and planning; not given (default): every one is planned and --optimize
    picks. simulate spells it --pipeline (its --strategy is the segment
    loader's)."""
    return click.option(flag, dest, default=None, type=click.Choice(list(STRATEGIES)),
                        help="Compiler pipeline before planning: none = the model as imported; layers = conv->pool "
                             "pairs fused; stripes = stripe regions wherever they lower the arena; auto = the "
                             "smallest arena within --max-extra-macs. Default: all four are planned and --optimize "
                             "picks one (auto when no --profile names the core)."
                             + (" " + help_extra if help_extra else ""))


def optimize_option():
    """--optimize balanced|ram|speed (default balanced): which strategy's plan
    (pyembed.target.objective), when --strategy is not given."""
    return click.option("--optimize", "optimize", default="balanced", show_default=True,
                        type=click.Choice(["balanced", "ram", "speed"]),
                        help="Without --strategy: ram = the smallest arena; speed = the fewest predicted "
                             "instructions (the core's QEMU-calibrated instruction model, else the simulator's "
                             "cycles); balanced = the smallest arena within 10 % of the fastest. Prints the chosen "
                             "plan beside the rejected ones.")


def max_extra_macs_option(flag="--strategy"):
    """--max-extra-macs 10%: the MAC budget of the auto strategy."""
    return click.option("--max-extra-macs", "max_extra_macs", default="10%", show_default=True,
                        help=f"MAC budget of {flag} auto over the imported model (10% or 0.1).")


def stream_input_option(help_text=None):
    """--stream-input: the model input is delivered row by row (pe_row_source)."""
    return click.option("--stream-input", "stream_input", is_flag=True,
                        help=help_text or "The model input is delivered row by row (a camera) into the stripe region "
                                          "reading it, so it takes no arena bytes (stripes / auto only).")


def stream_output_option(help_text=None):
    """--stream-output: the model output leaves row by row (pe_row_sink)."""
    return click.option("--stream-output", "stream_output", is_flag=True,
                        help=help_text or "The model output leaves row by row (a display, a DMA to the next "
                                          "stage): the stripe region writing it hands each row to a row sink "
                                          "(pe_row_sink) as soon as it is final, so the output takes no arena "
                                          "bytes (stripes / auto only).")


def split_line_stores_option():
    """--split-line-stores: each stripe region's line stores a planned buffer of their own."""
    return click.option("--split-line-stores", "split_stores", is_flag=True,
                        help="Memories per part: each stripe region keeps its line stores (and delay lines) in a "
                             "planned buffer of their own, apart from its scratch (row temporaries, states), so "
                             "the plan may put them in different RAM regions (a DTCM and an SRAM). Such a region's "
                             "output is not laid over its input.")


def wide_blocks_option():
    """--wide-blocks: stripe regions as full-width stripes in blocks of 32 columns (the executor's row loops)."""
    return click.option("--wide-blocks/--no-wide-blocks", "wide_blocks", default=None,
                        help="Stripe regions run as full-width stripes in blocks of 32 columns, where the C "
                             "executor runs its convolution row loops (faster on a Cortex-M with the DSP "
                             "extension; a larger region scratch: the work block and wider row stores). With "
                             "--strategy: that strategy's regions. Without (--optimize picks), auto's regions in "
                             "wide blocks are candidates ('auto+wide', 'auto+wide+lean') beside the narrow ones; "
                             "they are by default on a DSP core with the calibrated instruction model (not "
                             "with --stream-input / --stream-output), --wide-blocks offers them on any core "
                             "and with streaming, --no-wide-blocks never.")


def fc_int16_weights_option():
    """--fc-int16-weights: int8 FULLY_CONNECTED layers on int16 weights packed
    offline (pyembed.passes.fc_w16), off by default; --fc-int16-min-macs N:
    the smallest layer (MACs per row) it widens."""
    def deco(f):
        from pyembed.passes.fc_w16 import MIN_MACS
        f = click.option("--fc-int16-min-macs", "fc_w16_min_macs", type=click.IntRange(min=0),
                         default=MIN_MACS, show_default=True,
                         help="With --fc-int16-weights: widen only layers of at least this many MACs per row "
                              "(smaller ones gain nothing: the input is widened per call).")(f)
        return click.option("--fc-int16-weights", "fc_int16_weights", is_flag=True, default=False,
                            help="Flash for speed: run the int8 FULLY_CONNECTED layers from their weights packed "
                                 "offline into int16 (about twice their flash; fewer instructions per MAC on a "
                                 "Cortex-M with the DSP extension; same results). Prints each layer and the flash "
                                 "cost.")(f)
    return deco


def apply_fc_int16_weights(graph, enabled, min_macs=None):
    """(graph rewritten by pyembed.passes.fc_w16.widen_fc_weights, report,
    printable lines) when enabled, else (graph, None, [])."""
    if not enabled:
        return graph, None, []
    from pyembed.passes.fc_w16 import MIN_MACS, describe, widen_fc_weights
    g, report = widen_fc_weights(graph, MIN_MACS if min_macs is None else min_macs)
    return g, report, describe(report)


def optimize_summary(tp):
    """--json's "optimize" of a pyembed.target.planning.TargetPlan: the objective (None when
    --strategy was given), the strategy planned, its prediction and every candidate (chosen first)."""
    pred = tp.predicted
    return {"objective": tp.options.optimize if tp.options.strategy is None else None, "strategy": tp.strategy,
            "predicted": None if pred is None else {"value": round(pred[0]), "metric": pred[1], "source": pred[2]},
            "candidates": [dict(c.to_dict(), chosen=(i == 0)) for i, c in enumerate(tp.candidates)]}

def verbose_option():
    """-v/--verbose: the stripe regions' per-region internals (line stores,
    scratch breakdown, reasons) in the strategy report; without it one line
    names the regions (pyembed.target.planning.brief). JSON always has all."""
    return click.option("-v", "--verbose", is_flag=True,
                        help="Print every stripe region's internals (line stores, scratch breakdown, why it was "
                             "chosen); without it one line names the regions.")


def models_argument(name="model"):
    """MODEL...: one model, or several chained as one segmented use case
    (then --segments is required; see pyembed.target.usecase)."""
    return click.argument(name, type=ModelPath(), nargs=-1, required=True)


def cut_option():
    """--cut: the rule that places the weight segments' cuts (with --segments)."""
    return click.option("--cut", "segment_cut", type=click.Choice(["latency", "boundaries", "state", "balanced"]),
                        default="latency", show_default=True,
                        help="With --segments: where the segments are cut. latency = the fastest pipeline (each "
                             "segment's load hidden behind the previous one's compute); boundaries = a cut at every "
                             "model boundary, the rest by latency (with one model: the same as latency); state = the "
                             "fewest activation bytes carried across the cuts; balanced = segments of equal weight "
                             "bytes. With several models a cut is always made at each model boundary.")


def single_model(models, budget, command):
    """The one model of MODEL... when only one is given, else None (several:
    a chained use case, which needs --segments). Raises ArgumentError when
    several models are given without a segment block."""
    if len(models) == 1:
        return models[0]
    if budget is None:
        raise ArgumentError(f"MODEL: {command} with {len(models)} models runs them as one segmented use case and "
                            f"needs --segments BYTES (the RAM block for their weights)")
    return None
