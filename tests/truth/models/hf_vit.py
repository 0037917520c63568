"""Vision: a 1-layer transformers ViTModel on 16x16 images, 4x4 patches."""
import torch


def get_model_and_inputs():
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    config = ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=64)
    model = ViTModel(config).eval()
    return model, (torch.randn(2, 3, 16, 16),)
