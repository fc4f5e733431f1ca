"""SCENARIOS.md's W5: a MiniLM-sized transformer encoder, 4 x
TransformerEncoderLayer(d_model=384, nhead=6, dim_feedforward=1536,
activation="gelu", batch_first=True), on (batch, 128, 384) float32."""
D_MODEL, HEADS, FEEDFORWARD, LAYERS, SEQ = 384, 6, 1536, 4, 128


def w5(nn):
    """nn.TransformerEncoder of LAYERS layers, as a user writes it; its
    state_dict names are layers.<i>.self_attn.in_proj_weight, ... in both."""
    layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, dim_feedforward=FEEDFORWARD,
                                       activation="gelu", batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=LAYERS, enable_nested_tensor=False)


def input_shape(batch):
    return (batch, SEQ, D_MODEL)


def flops(batch):
    """Multiply-adds x 2 of the matmuls (projections, feed-forward, the
    attention scores and their weighted sum); pointwise work not counted."""
    tokens = batch * SEQ
    projections = tokens * (4 * D_MODEL * D_MODEL + 2 * D_MODEL * FEEDFORWARD)
    attention = 2 * batch * SEQ * SEQ * D_MODEL
    return 2 * LAYERS * (projections + attention)
