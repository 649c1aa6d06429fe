"""The query-set checks every auditor runs (issue 50, item 4), on real data: another site
of the same modality passes, another modality is refused."""

import numpy as np
import pytest

from monai_forget.audit.query_checks import (
    OUTSIDE_SHARE,
    check_query_images,
    checked_query,
    outside_share,
)
from monai_forget.data import LabelledImages, load_digits


def _set(images):
    return LabelledImages(np.asarray(images, np.float32), np.zeros(len(images), np.int64), None, 10)


def test_the_envelope_by_hand():
    """Known statistics spread evenly over [0, 1]: the envelope is about [-0.5, 1.5] for
    each statistic; a constant image at 1.4 is inside, one at 1.6 outside."""
    known = np.linspace(0, 1, 1001)[:, None, None, None] * np.ones((1, 1, 2, 2))
    inside, outside = np.full((1, 1, 2, 2), 1.4), np.full((1, 1, 2, 2), 1.6)
    assert outside_share(inside, known) == 0.0
    assert outside_share(outside, known) == 1.0
    assert outside_share(np.concatenate([inside, outside, inside, inside]), known) == 0.25


def test_half_of_the_digits_against_the_other_half_passes():
    digits = load_digits()
    order = np.random.default_rng(0).permutation(len(digits))
    query, known = digits.subset(order[:900]), digits.subset(order[900:])
    check_query_images(query, known)
    assert outside_share(query.images, known.images) == 0.0


def test_a_few_blank_frames_are_kept_more_than_a_fifth_refused():
    """Up to a fifth of D_Q may be blank (constant) frames; they are then copies of one."""
    digits = load_digits()
    images = np.array(digits.images[:100])
    images[:20] = 0.0
    check_query_images(_set(images), digits.subset(np.arange(100, 600)))
    # accepted, the 20 blank frames are copies of one: the audit decides on 81 images
    kept = checked_query(_set(images), digits.subset(np.arange(100, 600)))
    assert (len(kept.distinct), kept.exact, kept.near) == (81, 19, 0)
    images[20] = 0.0
    with pytest.raises(ValueError, match="21 of the query set's 100 images are constant"):
        check_query_images(_set(images), digits.subset(np.arange(100, 600)))


def test_another_site_passes_and_another_modality_is_refused(shared_data):
    from monai_forget.data import load_mnist_test, load_pneumoniamnist

    train = load_pneumoniamnist("train", shared_data)
    other_site = load_pneumoniamnist("test", shared_data)  # separately collected
    check_query_images(other_site, train)
    darker = _set(np.asarray(train.images[:500]) * 0.5)
    check_query_images(darker, train)
    mnist = load_mnist_test(shared_data).subset(np.arange(500))
    assert outside_share(mnist.images, train.images) > OUTSIDE_SHARE
    with pytest.raises(ValueError, match="another modality"):
        check_query_images(mnist, train)
