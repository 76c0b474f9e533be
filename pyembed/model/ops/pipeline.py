"""The compiler pipeline's operators (pyembed.passes.pipeline builds them;
no model file contains them): a fused conv -> pool pair, a stripe region and
a convolution streamed into a fully connected layer.
Their int32 words are laid out in csrc/include/pyembed/pe_pipeline.h; the C
runners are pe_graph_run_conv_pool / pe_graph_run_stripe_region."""
from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import register


@register("PE_CONV_POOL", code=140, c_name="PE_GOP_CONV_POOL")
def prepare_conv_pool(c):
    raise Unsupported("PE_CONV_POOL is made by pyembed.passes.pipeline from a CONV_2D and its pooling, "
                      "not read from a model file")


@register("PE_STRIPE_REGION", code=141, c_name="PE_GOP_STRIPE_REGION")
def prepare_stripe_region(c):
    raise Unsupported("PE_STRIPE_REGION is made by pyembed.passes.pipeline from a run of layers, "
                      "not read from a model file")


@register("PE_CONV_FC", code=142, c_name="PE_GOP_CONV_FC")
def prepare_conv_fc(c):
    raise Unsupported("PE_CONV_FC is made by pyembed.passes.conv_fc from a DEPTHWISE_CONV_2D and the "
                      "FULLY_CONNECTED reading its output, not read from a model file")
