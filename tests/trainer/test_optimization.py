from __future__ import annotations

import io
import math
import pickle

import pytest
import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR, LRScheduler, ReduceLROnPlateau

from trainer._optimization import create_optimizer, get_parameter_names_without_decay, get_scheduler
from trainer._training_args import SchedulerType, TrainingArguments


def make_optimizer(lr: float = 1.0) -> torch.optim.Optimizer:
    return torch.optim.SGD([nn.Parameter(torch.zeros(2))], lr=lr)


def lr_trace(scheduler: LRScheduler, steps: int) -> list[float]:
    """Learning rate in force at optimizer steps 0..steps (the scheduler is stepped after each one)."""
    values = [scheduler.get_last_lr()[0]]
    for _ in range(steps):
        scheduler.optimizer.step()
        scheduler.step()
        values.append(scheduler.get_last_lr()[0])
    return values


def approx(values):
    return pytest.approx(values, abs=1e-12)


def test_linear_with_warmup():
    trace = lr_trace(get_scheduler("linear", make_optimizer(), num_warmup_steps=2, num_training_steps=10), 12)
    assert [trace[i] for i in (0, 1, 2, 6, 10, 11, 12)] == approx([0.0, 0.5, 1.0, 0.5, 0.0, 0.0, 0.0])


def test_cosine():
    trace = lr_trace(get_scheduler(SchedulerType.COSINE, make_optimizer(), num_training_steps=10), 10)
    assert trace[0] == approx(1.0)
    assert trace[5] == approx(0.5)
    assert trace[10] == approx(0.0)
    assert trace[3] == approx(0.5 * (1 + math.cos(math.pi * 0.3)))
    one_cycle = lr_trace(
        get_scheduler("cosine", make_optimizer(), 0, 10, scheduler_specific_kwargs={"num_cycles": 1.0}), 10
    )
    assert one_cycle[5] == approx(0.0) and one_cycle[10] == approx(1.0)


def test_cosine_with_restarts():
    trace = lr_trace(
        get_scheduler(
            "cosine_with_restarts", make_optimizer(), 2, 12, scheduler_specific_kwargs={"num_cycles": 2}
        ),
        12,
    )
    assert trace[1] == approx(0.5)
    assert trace[2] == approx(1.0)
    assert trace[4] == approx(0.5 * (1 + math.cos(math.pi * 0.4)))
    assert trace[7] == approx(1.0)  # hard restart at half-way
    assert trace[12] == approx(0.0)
    default = lr_trace(get_scheduler("cosine_with_restarts", make_optimizer(), 0, 10), 10)
    assert default[5] == approx(0.5) and default[10] == approx(0.0)  # one cycle: same as cosine


def test_polynomial():
    kwargs = {"lr_end": 0.1, "power": 2.0}
    trace = lr_trace(
        get_scheduler("polynomial", make_optimizer(), 0, 10, scheduler_specific_kwargs=kwargs), 12
    )
    assert trace[0] == approx(1.0)
    assert trace[5] == approx(0.9 * 0.25 + 0.1)
    assert trace[10] == approx(0.1) and trace[12] == approx(0.1)
    default = lr_trace(get_scheduler("polynomial", make_optimizer(), 2, 10), 10)
    assert default[1] == approx(0.5)
    assert default[6] == approx((1 - 1e-7) * 0.5 + 1e-7)
    assert default[10] == approx(1e-7)


def test_constant_and_constant_with_warmup():
    assert lr_trace(get_scheduler("constant", make_optimizer(0.3), num_warmup_steps=5), 4) == approx(
        [0.3] * 5
    )
    trace = lr_trace(get_scheduler("constant_with_warmup", make_optimizer(), num_warmup_steps=4), 6)
    assert trace == approx([0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0])


def test_inverse_sqrt():
    trace = lr_trace(get_scheduler("inverse_sqrt", make_optimizer(), num_warmup_steps=4), 16)
    assert trace[2] == approx(0.5)
    assert trace[4] == approx(1.0)
    assert trace[16] == approx(0.5)  # 1 / sqrt(16 / 4)
    scheduler = get_scheduler("inverse_sqrt", make_optimizer())  # timescale 10000 when there is no warmup
    assert scheduler.lr_lambdas[0](20_000) == approx(1 / math.sqrt(3))  # (20000 + 10000) / 10000
    scheduler = get_scheduler(
        "inverse_sqrt", make_optimizer(), 0, scheduler_specific_kwargs={"timescale": 10}
    )
    assert scheduler.lr_lambdas[0](30) == approx(0.5)  # (30 + 10) / 10


def test_reduce_lr_on_plateau():
    scheduler = get_scheduler(
        "reduce_lr_on_plateau", make_optimizer(), scheduler_specific_kwargs={"patience": 0, "factor": 0.5}
    )
    assert isinstance(scheduler, ReduceLROnPlateau)
    scheduler.step(1.0)
    assert scheduler.get_last_lr() == approx([1.0])
    scheduler.step(2.0)
    assert scheduler.get_last_lr() == approx([0.5])


def test_cosine_with_min_lr():
    trace = lr_trace(
        get_scheduler(
            "cosine_with_min_lr", make_optimizer(), 0, 10, scheduler_specific_kwargs={"min_lr_rate": 0.1}
        ),
        12,
    )
    assert trace[0] == approx(1.0) and trace[5] == approx(0.55) and trace[10] == approx(0.1)
    trace = lr_trace(
        get_scheduler(
            "cosine_with_min_lr", make_optimizer(2.0), 2, 12, scheduler_specific_kwargs={"min_lr": 0.2}
        ),
        12,
    )
    assert trace[1] == approx(1.0) and trace[2] == approx(2.0) and trace[12] == approx(0.2)


def test_warmup_stable_decay():
    kwargs = {"num_decay_steps": 4}
    trace = lr_trace(
        get_scheduler("warmup_stable_decay", make_optimizer(), 2, 10, scheduler_specific_kwargs=kwargs), 11
    )
    # warmup 2, stable 10 - 2 - 4 = 4, cosine decay 4
    assert trace[:7] == approx([0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert trace[8] == approx(0.5)
    assert trace[10] == approx(0.0) and trace[11] == approx(0.0)
    kwargs = {"num_decay_steps": 2, "num_stable_steps": 1, "min_lr_ratio": 0.2, "decay_type": "linear"}
    trace = lr_trace(
        get_scheduler("warmup_stable_decay", make_optimizer(), 2, scheduler_specific_kwargs=kwargs), 6
    )
    assert trace == approx([0.2, 0.6, 1.0, 1.0, 0.6, 0.2, 0.2])


@pytest.mark.parametrize(
    ("call", "needles"),
    [
        (dict(name="exponential"), ["name", "'exponential'", "'linear'"]),
        (dict(name="linear"), ["num_training_steps", "None"]),
        (dict(name="cosine", num_training_steps=0), ["num_training_steps", "got 0"]),
        (dict(name="linear", num_warmup_steps=-1, num_training_steps=10), ["num_warmup_steps", "-1"]),
        (dict(name="linear", num_warmup_steps=1.5, num_training_steps=10), ["num_warmup_steps", "1.5"]),
        (
            dict(name="cosine", num_training_steps=10, scheduler_specific_kwargs={"min_lr": 0.1}),
            ["scheduler_specific_kwargs", "'min_lr'", "num_cycles"],
        ),
        (
            dict(name="linear", num_training_steps=10, scheduler_specific_kwargs={"power": 2}),
            ["'power'", "none"],
        ),
        (
            dict(name="polynomial", num_training_steps=10, scheduler_specific_kwargs={"lr_end": 2.0}),
            ["lr_end", "2.0"],
        ),
        (dict(name="cosine_with_min_lr", num_training_steps=10), ["min_lr", "min_lr_rate"]),
        (
            dict(
                name="cosine_with_min_lr",
                num_training_steps=10,
                scheduler_specific_kwargs={"min_lr": 0, "min_lr_rate": 0},
            ),
            ["exactly one"],
        ),
        (
            dict(
                name="cosine_with_min_lr", num_training_steps=10, scheduler_specific_kwargs={"min_lr_rate": 2}
            ),
            ["min_lr_rate", "2"],
        ),
        (dict(name="warmup_stable_decay", num_training_steps=10), ["num_decay_steps"]),
        (
            dict(name="warmup_stable_decay", scheduler_specific_kwargs={"num_decay_steps": 3}),
            ["num_training_steps"],
        ),
        (
            dict(
                name="warmup_stable_decay",
                num_warmup_steps=5,
                num_training_steps=6,
                scheduler_specific_kwargs={"num_decay_steps": 3},
            ),
            ["num_training_steps", "5 + 3"],
        ),
        (
            dict(
                name="warmup_stable_decay",
                num_training_steps=10,
                scheduler_specific_kwargs={"num_decay_steps": 3, "decay_type": "exp"},
            ),
            ["decay_type", "'exp'"],
        ),
        (
            dict(name="reduce_lr_on_plateau", scheduler_specific_kwargs={"bogus": 1}),
            ["'bogus'", "patience"],
        ),
        (
            dict(
                name="cosine_with_restarts",
                num_training_steps=10,
                scheduler_specific_kwargs={"num_cycles": 0.5},
            ),
            ["num_cycles", "0.5"],
        ),
    ],
)
def test_scheduler_errors_name_the_argument(call, needles):
    with pytest.raises(ValueError) as info:
        get_scheduler(optimizer=make_optimizer(), **call)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


SCHEDULES = [
    ("linear", {}),
    ("cosine", {}),
    ("cosine_with_restarts", {"num_cycles": 3}),
    ("polynomial", {"lr_end": 0.01, "power": 2.0}),
    ("constant", {}),
    ("constant_with_warmup", {}),
    ("inverse_sqrt", {}),
    ("cosine_with_min_lr", {"min_lr_rate": 0.1}),
    ("warmup_stable_decay", {"num_decay_steps": 4}),
]


@pytest.mark.parametrize(("name", "kwargs"), SCHEDULES)
def test_state_dict_round_trip_resumes_the_schedule(name, kwargs):
    def build():
        optimizer = make_optimizer(0.5)
        return get_scheduler(name, optimizer, 3, 12, scheduler_specific_kwargs=kwargs)

    reference = build()
    full = lr_trace(reference, 12)

    first = build()
    lr_trace(first, 5)
    buffer = io.BytesIO()
    torch.save({"optimizer": first.optimizer.state_dict(), "scheduler": first.state_dict()}, buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)  # what a checkpoint resume does

    resumed = build()
    resumed.optimizer.load_state_dict(state["optimizer"])
    resumed.load_state_dict(state["scheduler"])
    assert resumed.get_last_lr()[0] == pytest.approx(full[5])
    assert lr_trace(resumed, 7) == pytest.approx(full[5:])


@pytest.mark.parametrize(("name", "kwargs"), [*SCHEDULES, ("reduce_lr_on_plateau", {"patience": 1})])
def test_schedulers_pickle(name, kwargs):
    scheduler = get_scheduler(name, make_optimizer(), 2, 10, scheduler_specific_kwargs=kwargs)
    if isinstance(scheduler, LambdaLR):
        lr_trace(scheduler, 3)
    clone = pickle.loads(pickle.dumps(scheduler))
    assert type(clone) is type(scheduler)
    assert clone.get_last_lr() == scheduler.get_last_lr()
    if isinstance(scheduler, LambdaLR):
        assert lr_trace(clone, 4) == pytest.approx(lr_trace(scheduler, 4))


# ---- parameter groups and optimizers -----------------------------------------------------------------------


class MyNorm(nn.Module):  # a custom norm, recognised by its class name
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale / x.norm(dim=-1, keepdim=True).clamp_min(1e-6)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.proj = nn.Linear(4, 4)
        self.no_bias = nn.Linear(4, 4, bias=False)
        self.ln = nn.LayerNorm(4)
        self.bn = nn.BatchNorm1d(4)
        self.gn = nn.GroupNorm(2, 4)
        self.rms = nn.RMSNorm(4)
        self.custom = MyNorm(4)
        self.attn = nn.MultiheadAttention(4, 1)
        self.head = nn.Linear(4, 2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)  # (batch, seq, 4)
        x = self.no_bias(self.proj(x))
        x = self.ln(x)
        x = self.bn(x.transpose(1, 2)).transpose(1, 2)
        x = self.gn(x.transpose(1, 2)).transpose(1, 2)
        x = self.custom(self.rms(x))
        x, _ = self.attn(x, x, x)
        return self.head(x).mean()


NO_DECAY = {
    "proj.bias",
    "ln.weight",
    "ln.bias",
    "bn.weight",
    "bn.bias",
    "gn.weight",
    "gn.bias",
    "rms.weight",
    "custom.scale",
    "attn.in_proj_bias",
    "attn.out_proj.bias",
    "head.bias",
}


def test_parameter_names_without_decay():
    model = Net()
    names = get_parameter_names_without_decay(model)
    assert set(names) == NO_DECAY
    order = [name for name, _ in model.named_parameters()]
    assert names == [name for name in order if name in NO_DECAY]


def group_names(model: nn.Module, optimizer: torch.optim.Optimizer) -> list[set[str]]:
    by_id = {id(p): name for name, p in model.named_parameters()}
    return [{by_id[id(p)] for p in group["params"]} for group in optimizer.param_groups]


def test_create_optimizer_groups_and_settings():
    model = Net()
    args = TrainingArguments(
        learning_rate=1e-3, weight_decay=0.01, adam_beta1=0.8, adam_beta2=0.99, adam_epsilon=1e-6
    )
    optimizer = create_optimizer(model, args)
    assert type(optimizer) is torch.optim.AdamW
    decay, no_decay = group_names(model, optimizer)
    assert no_decay == NO_DECAY
    assert decay == {"embed.weight", "proj.weight", "no_bias.weight", "attn.in_proj_weight",
                     "attn.out_proj.weight", "head.weight"}  # fmt: skip
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.01, 0.0]
    for group in optimizer.param_groups:
        assert group["lr"] == 1e-3 and group["betas"] == (0.8, 0.99) and group["eps"] == 1e-6
    model(torch.randint(0, 10, (3, 5))).backward()
    optimizer.step()  # the groups are usable


@pytest.mark.parametrize(
    ("optim", "cls"),
    [
        ("adamw_torch", torch.optim.AdamW),
        ("adamw_torch_fused", torch.optim.AdamW),
        ("adam", torch.optim.Adam),
        ("sgd", torch.optim.SGD),
        ("adagrad", torch.optim.Adagrad),
        ("rmsprop", torch.optim.RMSprop),
    ],
)
def test_every_optimizer_builds_and_steps(optim, cls):
    model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 1))
    optimizer = create_optimizer(model, TrainingArguments(optim=optim, learning_rate=0.1, weight_decay=0.1))
    assert type(optimizer) is cls
    assert len(optimizer.param_groups) == 2
    if optim == "adamw_torch_fused":
        assert optimizer.defaults["fused"] is True
    model(torch.randn(2, 3)).sum().backward()
    optimizer.step()


def test_optim_args_are_passed_through():
    model = nn.Linear(3, 1)
    optimizer = create_optimizer(
        model, TrainingArguments(optim="sgd", optim_args={"momentum": 0.9, "nesterov": True})
    )
    assert optimizer.defaults["momentum"] == 0.9 and optimizer.defaults["nesterov"] is True
    optimizer = create_optimizer(model, TrainingArguments(optim="adamw_torch", optim_args={"amsgrad": True}))
    assert optimizer.defaults["amsgrad"] is True


@pytest.mark.parametrize(
    ("optim_args", "needles"),
    [
        ({"lr": 0.1}, ["'lr'", "learning_rate"]),
        ({"weight_decay": 0.1}, ["'weight_decay'", "TrainingArguments.weight_decay"]),
        ({"params": []}, ["'params'"]),
        ({"momentum": 0.9}, ["'momentum'", "AdamW", "amsgrad"]),
    ],
)
def test_bad_optim_args(optim_args, needles):
    with pytest.raises(ValueError) as info:
        create_optimizer(nn.Linear(2, 1), TrainingArguments(optim_args=optim_args))
    for needle in needles:
        assert needle in str(info.value)


def test_frozen_parameters_are_left_out():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    model[0].requires_grad_(False)
    optimizer = create_optimizer(model, TrainingArguments())
    assert group_names(model, optimizer) == [{"1.weight"}, {"1.bias"}]
    model.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        create_optimizer(model, TrainingArguments())


def test_shared_parameters_appear_once():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    model[1].weight = model[0].weight
    optimizer = create_optimizer(model, TrainingArguments())
    assert sum(len(g["params"]) for g in optimizer.param_groups) == 3
