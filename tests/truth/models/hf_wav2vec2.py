"""Audio: a 1-layer transformers Wav2Vec2Model (conv feature encoder, weight-normed positional conv) on raw audio."""
import torch


def get_model_and_inputs():
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    torch.manual_seed(0)
    config = Wav2Vec2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                            conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                            num_conv_pos_embedding_groups=2, mask_time_prob=0.0)
    model = Wav2Vec2Model(config).eval()
    return model, (torch.randn(1, 400),)
