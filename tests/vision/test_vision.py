"""Vision: unit masks on timm models (known answers), mean-pooling, cue-conflict metrics, the
textured Fashion-MNIST set and the shape-bias experiment end to end."""

import json

import numpy as np
import pytest
import torch

from heurlens.errors import HeurlensError
from heurlens.vision.hooks import activation_cache, mask_sites, masks_for, unit_masks, unit_means
from heurlens.vision.mean_pool import SLIC, Felzenszwalb, mean_pool, mean_pool_images
from heurlens.vision.metrics import cue_conflict_scores, prediction_accuracy, read_cue_conflict_folder
from heurlens.vision.models import create_classifier

for _package in ("timm", "torchvision", "skimage"):  # the extra heurlens[vision]; without it, nothing here runs
    pytest.importorskip(_package)


@pytest.fixture(scope="module")
def vit():
    return create_classifier("vit-tiny-4layer", 10, in_chans=1, img_size=28, seed=0).eval()


@pytest.fixture(scope="module")
def resnet():
    model = create_classifier("resnet18-quarter", 10, in_chans=1, seed=0).eval()
    with torch.no_grad():  # timm starts each block's last batch norm at zero; give every branch an output
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
    return model


def _attention_output(model, layer, images, **masking):
    seen = []
    handle = model.blocks[layer].attn.register_forward_hook(lambda mod, args, out: seen.append(out))
    try:
        if masking:
            with unit_masks(model, **masking):
                model(images)
        else:
            model(images)
    finally:
        handle.remove()
    return seen[0]


@torch.no_grad()
def test_vit_head_mask_removes_exactly_that_heads_contribution(vit):
    """Zero-ablating L1.H2 changes layer 1's attention output by exactly z_2 @ W_O[:, head 2]^T."""
    images = torch.randn(3, 1, 28, 28)
    with activation_cache(vit, ["blocks.1.attn"]) as cache:
        full = _attention_output(vit, 1, images)
    z = cache["blocks.1.attn"][0]  # [batch, token, heads * d_head], input of attn.proj
    n_heads = vit.blocks[1].attn.num_heads
    d_head = z.shape[-1] // n_heads
    w_head = vit.blocks[1].attn.proj.weight[:, 2 * d_head:3 * d_head]
    expected = z[..., 2 * d_head:3 * d_head] @ w_head.T

    ablated = _attention_output(vit, 1, images, masks=masks_for(vit, "L1.H2"))
    torch.testing.assert_close(full - ablated, expected, atol=1e-5, rtol=1e-4)
    assert expected.abs().mean() > 1e-3  # the head does contribute, so the check has teeth


@torch.no_grad()
def test_vit_mean_ablation_replaces_the_head_by_its_mean(vit):
    images = torch.randn(4, 1, 28, 28)
    means = unit_means(vit, images)
    with activation_cache(vit, ["blocks.0.attn"]) as cache:
        full = _attention_output(vit, 0, images)
    z = cache["blocks.0.attn"][0]
    torch.testing.assert_close(means["blocks.0.attn"], z.mean(0))  # per-token mean over images
    d_head = z.shape[-1] // vit.blocks[0].attn.num_heads
    w_head = vit.blocks[0].attn.proj.weight[:, :d_head]
    expected = (z[..., :d_head] - means["blocks.0.attn"][None, :, :d_head]) @ w_head.T
    ablated = _attention_output(vit, 0, images, masks=masks_for(vit, "L0.H0"), replacements=means)
    torch.testing.assert_close(full - ablated, expected, atol=1e-5, rtol=1e-4)


@torch.no_grad()
def test_vit_mlp_mask_and_all_ones_masks_change_nothing_else(vit):
    images = torch.randn(2, 1, 28, 28)
    full = vit(images)
    with unit_masks(vit, masks_for(vit, "L0.H0") | {"blocks.0.attn": torch.ones(3)}):
        torch.testing.assert_close(vit(images), full)
    with unit_masks(vit, masks_for(vit, "L3.MLP")):
        assert not torch.allclose(vit(images), full)
    torch.testing.assert_close(vit(images), full)  # hooks removed on exit


@torch.no_grad()
def test_resnet_residual_mask_leaves_the_shortcut(resnet):
    """With its residual branch masked, an identity-shortcut block outputs relu(input) = input."""
    images = torch.randn(2, 1, 28, 28)
    seen = {}
    hooks = [resnet.layer1[1].register_forward_hook(lambda m, a, out: seen.update(inp=a[0].clone(), out=out.clone()))]
    with unit_masks(resnet, masks_for(resnet, "layer1.1")):
        resnet(images)
    hooks[0].remove()
    torch.testing.assert_close(seen["out"], torch.relu(seen["inp"]))
    assert not torch.equal(seen["out"], resnet.layer1[1](seen["inp"]))  # the branch normally adds something


@torch.no_grad()
def test_resnet_channel_mask_replaces_one_channel(resnet):
    images = torch.randn(3, 1, 28, 28)
    means = unit_means(resnet, images)
    with activation_cache(resnet, ["layer2.1"]) as cache:
        resnet(images)
    full = cache["layer2.1"][0]
    masked = full.clone()
    masked[:, 5] = means["layer2.1"][5]
    out = []
    with unit_masks(resnet, masks_for(resnet, "layer2.1.C5"), replacements=means):
        # registered after the mask's hook, so it sees the masked output
        handle = resnet.layer2[1].register_forward_hook(lambda m, a, o: out.append(o.clone()))
        resnet(images)
        handle.remove()
    torch.testing.assert_close(out[0], masked)


def test_unit_addressing_errors(vit, resnet):
    assert set(mask_sites(vit)) == {f"blocks.{i}.{part}" for i in range(4) for part in ("attn", "mlp")}
    with pytest.raises(HeurlensError, match="layer 9 is out of range"):
        masks_for(vit, "L9.H0")
    with pytest.raises(HeurlensError, match="no block 'layer9.0'"):
        masks_for(resnet, "layer9.0")
    with pytest.raises(HeurlensError, match="no block ''"):
        masks_for(resnet, "layer1.0,")
    with pytest.raises(HeurlensError, match="channels C0-C15"):
        masks_for(resnet, "layer1.0.C99")
    with pytest.raises(HeurlensError, match="no mask site"):
        with unit_masks(vit, {"blocks.9.attn": torch.ones(3)}):
            pass
    with pytest.raises(HeurlensError, match="has no timm ViT attention block or ResNet block"):
        mask_sites(torch.nn.Linear(2, 2))


def test_create_classifier_errors_and_local_weights(tmp_path, resnet):
    from safetensors.torch import save_file

    with pytest.raises(HeurlensError, match="unknown model"):
        create_classifier("no-such-net", 10)
    with pytest.raises(HeurlensError, match="does not exist"):
        create_classifier("resnet18-quarter", 10, weights_file=tmp_path / "missing.safetensors")
    path = tmp_path / "weights.safetensors"
    save_file(resnet.state_dict(), str(path))
    loaded = create_classifier("resnet18-quarter", 10, in_chans=1, weights_file=path, seed=7)
    for name, value in resnet.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], value)


def test_mean_pool_keeps_region_means_exactly():
    rng = np.random.default_rng(0)
    image = rng.random((6, 5, 3)).astype(np.float32)
    labels = rng.integers(0, 4, (6, 5)) * 7  # labels need not be 0..k-1
    pooled = mean_pool(image, labels)
    for label in np.unique(labels):
        region = labels == label
        np.testing.assert_allclose(pooled[region], np.broadcast_to(image[region].mean(0), pooled[region].shape),
                                   rtol=1e-6)
    with pytest.raises(HeurlensError, match="does not match"):
        mean_pool(image, labels[:3])


@pytest.mark.parametrize("segmenter", [SLIC(), Felzenszwalb()])
def test_mean_pool_leaves_single_region_and_flat_images_unchanged(segmenter, tmp_path, monkeypatch):
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    flat = torch.full((1, 3, 16, 16), 0.3)
    two_tone = torch.full((1, 3, 16, 16), 0.2)
    two_tone[..., 8:] = 0.9
    images = torch.cat([flat, two_tone])
    pooled = mean_pool_images(images, segmenter, progress=False)
    torch.testing.assert_close(pooled, images)
    textured = torch.rand(2, 1, 16, 16)
    first = mean_pool_images(textured, segmenter, progress=False)
    assert first.std() < textured.std()  # texture inside regions is averaged away
    assert len(list((tmp_path / "mean_pooled").glob("*.safetensors"))) == 2
    torch.testing.assert_close(mean_pool_images(textured, segmenter, progress=False), first)  # from the cache


def test_cue_conflict_metrics_on_hand_made_predictions():
    shapes = torch.tensor([0, 1, 2, 3, 4])
    textures = torch.tensor([1, 1, 0, 2, 3])  # the second image has no conflict and is left out
    predictions = torch.tensor([0, 1, 0, 3, 1])  # by shape, (left out), by texture, by shape, neither
    scores = cue_conflict_scores(predictions, shapes, textures)
    assert scores == pytest.approx({"accuracy": 2 / 4, "robustness": 1 - 1 / 4, "shape_bias": 2 / 3})
    assert prediction_accuracy(predictions, shapes) == pytest.approx(3 / 5)
    with pytest.raises(HeurlensError, match="not a cue-conflict set"):
        cue_conflict_scores(predictions, shapes, shapes)


def test_read_cue_conflict_folder(tmp_path):
    classes = ["cat", "dog", "knife"]
    for shape, texture in [("cat", "dog"), ("dog", "knife"), ("dog", "dog")]:
        (tmp_path / shape).mkdir(exist_ok=True)
        (tmp_path / shape / f"{shape}1-{texture}2.png").write_bytes(b"")
    files, shapes, textures = read_cue_conflict_folder(tmp_path, classes)
    assert [f.name for f in files] == ["cat1-dog2.png", "dog1-dog2.png", "dog1-knife2.png"]
    assert shapes.tolist() == [0, 1, 1] and textures.tolist() == [1, 1, 2]
    (tmp_path / "cat" / "cat3-horse1.png").write_bytes(b"")
    with pytest.raises(HeurlensError, match="cue-conflict layout"):
        read_cue_conflict_folder(tmp_path, classes)


def _fashion_mnist_or_skip():
    from heurlens.vision.textured_shapes import fashion_mnist_dir

    try:
        fashion_mnist_dir()
    except HeurlensError as error:
        pytest.skip(str(error))


def test_textured_sets_assign_textures_as_asked():
    _fashion_mnist_or_skip()
    from heurlens.vision.textured_shapes import (
        BACKGROUND,
        TEXTURE_MEAN,
        load_fashion_mnist,
        paint,
        texture_bank,
        textured_set,
    )

    indices = torch.arange(200)
    agreeing, conflicting = textured_set("train", indices, 1.0, 0), textured_set("train", indices, 0.0, 0)
    garments, labels = load_fashion_mnist("train")
    assert torch.equal(agreeing.shapes, labels[:200]) and torch.equal(agreeing.textures, agreeing.shapes)
    assert (conflicting.textures != conflicting.shapes).all()
    assert set(conflicting.textures.tolist()) == set(range(10))
    assert [abs(t.mean().item() - TEXTURE_MEAN) < 0.02 for t in texture_bank()] == [True] * 10
    empty = paint(torch.zeros(1, 28, 28), torch.tensor([3]), torch.Generator().manual_seed(0))
    bank = texture_bank()[3]
    crops = bank.unfold(0, 28, 1).unfold(1, 28, 1)  # every 28x28 crop of texture 3
    assert ((crops * BACKGROUND - empty[0, 0]).abs().amax(dim=(-1, -2)) < 1e-6).any()


def test_shape_bias_experiment_runs_and_resumes(tmp_path, monkeypatch):
    _fashion_mnist_or_skip()
    from heurlens.vision.shape_bias import SHAPE_BIAS_CONDITIONS, ShapeBiasRun, ShapeBiasSettings, summary

    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path / "cache"))
    settings = ShapeBiasSettings(pretrain_size=300, pretrain_epochs=1, discovery_size=100, discovery_epochs=3,
                                 discovery_lr=0.05,
                                 downstream_size=100, downstream_epochs=1, downstream_seeds=1, validation_size=100,
                                 test_size=100)
    out = tmp_path / "run"
    table1, table2 = ShapeBiasRun(settings, out, progress=False).run()
    assert table1["condition"].tolist() == list(SHAPE_BIAS_CONDITIONS)
    assert table1["train images"].tolist() == [100, 100, 100, 200, 100]
    assert ((table1["original"] >= 0) & (table1["original"] <= 1)).all()
    assert table2["model"].tolist() == ["base model", "shape subnetwork"]
    assert 0 < table2["% parameters"][1] < 100
    written = {p: p.stat().st_mtime_ns for p in (out / "conditions").glob("*.json")}
    assert len(written) == len(SHAPE_BIAS_CONDITIONS)

    more = ShapeBiasSettings(**{**settings.to_dict(), "downstream_seeds": 2})  # resumes: only the new seed trains
    again, _ = ShapeBiasRun(more, out, progress=False).run(conditions=("from scratch",))
    assert {p: p.stat().st_mtime_ns for p in (out / "conditions").glob("*.json") if p in written} == written
    assert again["seed"].tolist() == [0, 1]
    assert again.iloc[0].equals(table1[table1["condition"] == "from scratch"].iloc[0])
    row = summary(again).iloc[0]
    mean, std = 100 * again["mean-pooled"].mean(), 100 * again["mean-pooled"].std()
    assert row["seeds"] == 2 and row["mean-pooled"] == f"{mean:.1f} ± {std:.1f}"
    assert json.loads((out / "settings.json").read_text())["pretrain_size"] == 300
    with pytest.raises(HeurlensError, match="other settings \\(pretrain_size\\)"):
        ShapeBiasRun(ShapeBiasSettings(**{**settings.to_dict(), "pretrain_size": 301}), out, progress=False)


def test_geirhos_16_classes_from_wordnet_hypernyms():
    from heurlens.vision.geirhos16 import DEBIAN_WORDNET, GEIRHOS_CATEGORIES, imagenet_to_16_class

    if not (DEBIAN_WORDNET / "data.noun").is_file():
        pytest.skip("WordNet missing (apt-get install wordnet-base)")
    mapping = imagenet_to_16_class()
    by_category = {name: sorted(i for i, c in mapping.items() if c == name) for name in GEIRHOS_CATEGORIES}
    # the classes Geirhos et al. list for these categories (ImageNet indices)
    assert by_category["dog"] == list(range(151, 269))
    assert by_category["cat"] == [281, 282, 283, 284, 285]
    assert by_category["bear"] == [294, 295, 296, 297]
    assert by_category["elephant"] == [385, 386]
    assert by_category["airplane"] == [404]
    assert {444, 671} <= set(by_category["bicycle"]) and 499 in by_category["knife"]
    assert all(by_category.values())
    assert 0 not in mapping  # tench, a fish, is in none
    with pytest.raises(HeurlensError, match="wordnet-base"):
        from heurlens.vision.geirhos16 import noun_hypernyms
        noun_hypernyms(DEBIAN_WORDNET / "nowhere")


def test_images_of_reads_datasets_and_folders(tmp_path):
    from PIL import Image
    from torchvision.datasets import FakeData

    from heurlens.vision.mean_pool import images_of

    images, labels = images_of(FakeData(size=3, image_size=(3, 8, 6), num_classes=4))
    assert images.shape == (3, 3, 8, 6) and 0 <= images.min() and images.max() <= 1 and labels.max() < 4
    for label, colour in (("bag", (255, 0, 0)), ("shoe", (0, 0, 255))):
        (tmp_path / label).mkdir()
        Image.new("RGB", (5, 4), colour).save(tmp_path / label / "a.png")
    images, labels = images_of(tmp_path)
    assert labels.tolist() == [0, 1]
    assert images[0, :, 0, 0].tolist() == [1, 0, 0] and images[1, :, 0, 0].tolist() == [0, 0, 1]
    Image.new("RGB", (7, 7)).save(tmp_path / "shoe" / "b.png")
    with pytest.raises(HeurlensError, match="different sizes"):
        images_of(tmp_path)
    with pytest.raises(HeurlensError, match="not a folder"):
        images_of(tmp_path / "missing")


def test_named_errors_for_impossible_settings(tmp_path):
    import numpy as np

    from heurlens.vision.mean_pool import SegmentAnything

    with pytest.raises(HeurlensError, match="segment_anything package"):
        SegmentAnything(checkpoint=str(tmp_path / "sam.pth"))(np.zeros((4, 4, 3)))
    _fashion_mnist_or_skip()
    from heurlens.vision.shape_bias import ShapeBiasRun, ShapeBiasSettings
    from heurlens.vision.textured_shapes import textured_set

    with pytest.raises(HeurlensError, match=r"texture_agreement must lie in \[0, 1\]"):
        textured_set("train", torch.arange(3), 1.5, 0)
    with pytest.raises(HeurlensError, match="split must be 'train' or 'test'"):
        textured_set("validation", torch.arange(3), 1.0, 0)
    with pytest.raises(HeurlensError, match="need 61000 training garments; Fashion-MNIST has 60,000"):
        ShapeBiasRun(ShapeBiasSettings(pretrain_size=56_000), tmp_path / "a", progress=False)
    with pytest.raises(HeurlensError, match="test_size is at most 10,000"):
        ShapeBiasRun(ShapeBiasSettings(test_size=10_001), tmp_path / "b", progress=False)
