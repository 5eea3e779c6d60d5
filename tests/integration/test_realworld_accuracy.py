"""What a user gets from the defaults of PlClassifier and Proden on real partial labels (issue #36; benchmarks/)."""

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.preprocessing import MinMaxScaler

import pll


def split(shared_data, name, seed):
    ds = pll.load_dataset(shared_data / "realworld" / f"{name}.mat")
    return pll.train_test_split(ds, random_state=seed)


def test_boosting_with_the_defaults_beats_dst_pll_on_bird_song(shared_data):
    train, test = split(shared_data, "bird-song", 0)
    ours = pll.PlClassifier(HistGradientBoostingClassifier(), random_state=0).fit(train.X, train.S)
    scaler = MinMaxScaler().fit(train.X)
    dst = pll.DstPll(random_state=0).fit(scaler.transform(train.X), train.S)
    accuracy = (ours.predict(test.X) == test.y).mean()
    baseline = (dst.predict(scaler.transform(test.X)) == test.y).mean()
    assert accuracy >= baseline + 0.03, (accuracy, baseline)


def test_class_balance_keeps_unregularised_boosting_from_collapsing_on_msrc_v2(shared_data):
    """Seed 1: without the balance, boosting's leaves blew up on a class the disambiguation left rare (9.9 %)."""
    train, test = split(shared_data, "msrc-v2", 1)
    model = pll.PlClassifier(HistGradientBoostingClassifier(), max_rounds=0, random_state=1).fit(train.X, train.S)
    assert (model.predict(test.X) == test.y).mean() > 0.4


def test_proden_with_its_defaults_beats_the_published_state_of_the_art_on_msrc_v2(shared_data):
    """Class balance: 65.6 % over 5 splits (benchmarks/proden.py), 55.1 % without it; the best published is 54.8 %."""
    train, test = split(shared_data, "msrc-v2", 0)
    model = pll.Proden(random_state=0).fit(train.X, train.S)
    assert (model.predict(test.X) == test.y).mean() > 0.6
