"""The one mask formula m * x + (1 - m) * c at every kind of site, and the one mean computation, on
hand-made activations whose answers are written out."""

import torch

from heurlens.interventions.mask_sites import MaskSite, SiteMeans, head_site, mlp_site


def test_split_heads_keep_or_take_the_replacement():
    site = head_site(3, n_heads=3)
    assert (site.name, site.adapter) == ("blocks.3.attn.hook_z", "hook point")
    z = torch.arange(2 * 2 * 3 * 2, dtype=torch.float32).view(2, 2, 3, 2)  # [batch, pos, head, d_head]
    mean = torch.full((3, 2), -1.0)
    out = site.masked(z, torch.tensor([1.0, 0.0, 0.5]), mean)
    assert torch.equal(out[..., 0, :], z[..., 0, :])  # kept
    assert torch.equal(out[..., 1, :], torch.full((2, 2, 2), -1.0))  # replaced by its mean
    assert torch.equal(out[..., 2, :], 0.5 * z[..., 2, :] - 0.5)  # halfway


def test_packed_heads_and_channels_and_zero_replacement():
    packed = MaskSite("blocks.0.attn.proj", 3, "packed heads", "module input")
    x = torch.arange(1 * 2 * 6, dtype=torch.float32).view(1, 2, 6)  # [batch, token, head * d_head]
    out = packed.masked(x, torch.tensor([1.0, 0.0, 1.0]), None)
    assert torch.equal(out[..., 2:4], torch.zeros(1, 2, 2)) and torch.equal(out[..., [0, 1, 4, 5]], x[..., [0, 1, 4, 5]])
    channels = MaskSite("layer1.0", 3, "channels", "module output")
    image = torch.ones(2, 3, 2, 2)  # [batch, channel, H, W]
    per_pixel_mean = torch.arange(12, dtype=torch.float32).view(3, 2, 2)  # one example's activation
    out = channels.masked(image, torch.tensor([0.0, 1.0, 1.0]), per_pixel_mean)
    assert torch.equal(out[:, 0], per_pixel_mean[0].expand(2, 2, 2)) and torch.equal(out[:, 1:], image[:, 1:])
    mlp = mlp_site(1)
    out = mlp.masked(torch.ones(2, 4, 5), torch.tensor(0.0), torch.full((5,), 7.0))
    assert torch.equal(out, torch.full((2, 4, 5), 7.0))


def test_site_means_over_real_tokens_or_per_position():
    text = SiteMeans(per_position=False)
    first = torch.tensor([[[1.0], [3.0]], [[5.0], [100.0]]])  # [batch, pos, 1]; the 100 is padding
    text.add("h", first, torch.tensor([[1, 1], [1, 0]]))
    text.add("h", torch.tensor([[[7.0], [9.0]]]))  # no mask: every token counts
    assert text.means()["h"].item() == (1 + 3 + 5 + 7 + 9) / 5 and text.counts["h"].item() == 5
    vision = SiteMeans(per_position=True)
    vision.add("b", torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    vision.add("b", torch.tensor([[5.0, 9.0]]))
    assert torch.equal(vision.means()["b"], torch.tensor([3.0, 5.0]))
