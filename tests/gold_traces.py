"""Hand-written gold traces of 44 problems across the primitive families, with independently computed answers.

Each entry: (id, problem text, trace dict, expected answer value in the answer's unit). The expected values
are written out by hand (closed-form arithmetic below), not computed by the primitives under test.
"""

from __future__ import annotations

import math


def G(name, value, unit="dimensionless", desc=""):
    return {"name": name, "value": value, "unit": unit, "desc": desc}


def S(op, out, unit="dimensionless", value=None, **args):
    d = {"op": op, "args": args, "out": {"name": out, "unit": unit}}
    if value is not None:
        d["value"] = value
    return d


def T(givens, steps, name, unit):
    return {"givens": givens, "steps": steps, "answer": [{"name": name, "unit": unit}]}


g0 = 9.80665
GOLD: list[tuple[str, str, dict, float]] = [
    # ---------------------------------------------------------------- arithmetic / finance (GSM8K-like)
    ("eggs", "Janet's ducks lay 16 eggs a day. She eats 3 and bakes with 4, and sells the rest at $2 each. "
             "How much does she make a day?",
     T([G("laid", 16, "eggs"), G("eaten", 3, "eggs"), G("baked", 4, "eggs"), G("price", 2, "USD/egg")],
       [S("sub", "r1", "eggs", x="laid", y="eaten"), S("sub", "left", "eggs", 9, x="r1", y="baked"),
        S("mul", "income", "USD", 18, x="left", y="price")], "income", "USD"), 18.0),
    ("pay", "Weng earns $12 an hour for babysitting. Yesterday she did 50 minutes. How much did she earn?",
     T([G("rate", 12, "USD/hour"), G("t", 50, "minute")], [S("hourly_pay", "pay", "USD", rate="rate", hours="t")],
       "pay", "USD"), 10.0),
    ("discount", "A $80 jacket is 25% off. What is the price?",
     T([G("price", 80, "USD"), G("off", 25, "percent")], [S("discount_price", "p", "USD", price="price", p="off")],
       "p", "USD"), 60.0),
    ("tax", "A meal costs $40 plus 8% tax. Total?",
     T([G("meal", 40, "USD"), G("tax", 8, "percent")], [S("price_after_tax", "tot", "USD", price="meal", rate="tax")],
       "tot", "USD"), 43.2),
    ("simple_int", "Simple interest on $1000 at 5% a year for 3 years?",
     T([G("p", 1000, "USD"), G("r", 0.05), G("n", 3)], [S("simple_interest", "i", "USD", p="p", r="r", n="n")],
       "i", "USD"), 150.0),
    ("compound", "$1000 compounded at 10% yearly for 2 years grows to?",
     T([G("p", 1000, "USD"), G("r", 10, "%"), G("n", 2)], [S("compound_amount", "a", "USD", p="p", r="r", n="n")],
       "a", "USD"), 1210.0),
    ("split", "Four friends split a $120 bill evenly. Each pays?",
     T([G("bill", 120, "USD"), G("n", 4, "people")], [S("split_evenly", "each", "USD/person", total="bill", n="n")],
       "each", "USD/person"), 30.0),
    ("unit_price", "12 pencils cost $3. Cost of one pencil in cents?",
     T([G("cost", 3, "USD"), G("n", 12, "pencils")], [S("unit_rate", "each", "USD/pencil", total="cost", count="n")],
       "each", "cents/pencil"), 25.0),
    ("percent_change", "A price rose from $50 to $60. Percent increase?",
     T([G("old", 50, "USD"), G("new", 60, "USD")], [S("percent_change", "pc", "percent", 20, old="old", new="new")],
       "pc", "percent"), 20.0),
    ("mean", "Scores 80, 90 and 85: the mean?",
     T([G("a", 80), G("b", 90), G("c", 85)], [S("mean", "m", x1="a", x2="b", x3="c")], "m", "dimensionless"), 85.0),
    ("dozen", "Three dozen cookies shared by 9 kids: how many each?",
     T([G("dz", 3), G("kids", 9, "kids")],
       [S("const", "twelve", name="dozen"), S("mul", "cookies", value=36, x="dz", y="twelve"),
        S("div", "each", "1/kid", x="cookies", y="kids")], "each", "1/kid"), 4.0),
    ("profit", "Revenue $500, cost $320: profit margin?",
     T([G("rev", 500, "USD"), G("cost", 320, "USD")], [S("profit_margin", "pm", "percent", revenue="rev", cost="cost")],
       "pm", "percent"), 36.0),
    # ---------------------------------------------------------------- algebra (SymPy-backed) and number theory
    ("solve_lin", "Solve 2x + 3 = 7.",
     T([], [S("solve_equation", "x", equation="2*x + 3 = 7", var="x")], "x", "dimensionless"), 2.0),
    ("quadratic", "Larger root of x^2 - 5x + 6 = 0.",
     T([G("a", 1), G("b", -5), G("c", 6)], [S("quadratic_root_larger", "r", a="a", b="b", c="c")], "r",
       "dimensionless"), 3.0),
    ("eval", "Evaluate 3n^2 + 1 for n = 4.",
     T([G("n", 4)], [S("eval_expr", "v", expr="3*n**2 + 1")], "v", "dimensionless"), 49.0),
    ("gcd_lcm", "lcm(12, 18) / gcd(12, 18)?",
     T([G("a", 12), G("b", 18)], [S("lcm", "l", x="a", y="b"), S("gcd", "g", x="a", y="b"),
                                  S("div", "q", value=6, x="l", y="g")], "q", "dimensionless"), 6.0),
    ("binomial", "Ways to choose 2 of 5?", T([G("n", 5), G("k", 2)], [S("binomial", "c", n="n", k="k")], "c",
                                             "dimensionless"), 10.0),
    ("factorial", "5! / 3!?", T([G("a", 5), G("b", 3)], [S("factorial", "fa", n="a"), S("factorial", "fb", n="b"),
                                                         S("div", "q", x="fa", y="fb")], "q", "dimensionless"), 20.0),
    ("series", "Sum of the first 10 terms of 3, 7, 11, ...",
     T([G("a1", 3), G("d", 4), G("n", 10)], [S("arithmetic_series_sum", "s", a1="a1", d="d", n="n")], "s",
       "dimensionless"), 210.0),
    # ---------------------------------------------------------------- trigonometry / exponential
    ("ramp", "A 5 m ramp rises at 30 degrees. Height?",
     T([G("L", 5, "m"), G("th", 30, "degree")], [S("opposite_from_hyp", "h", "m", c="L", theta="th")], "h", "cm"),
     250.0),
    ("hyp", "Legs 3 m and 4 m: hypotenuse?",
     T([G("a", 3, "m"), G("b", 400, "cm")], [S("hyp_from_legs", "c", "m", 5, a="a", b="b")], "c", "m"), 5.0),
    ("half_life", "100 g with half-life 5 days: how much after 15 days?",
     T([G("m0", 100, "g"), G("th", 5, "day"), G("t", 15, "day")],
       [S("half_life_decay", "m", "g", n0="m0", t_half="th", t="t")], "m", "g"), 12.5),
    ("log", "log10 of 1000?", T([G("x", 1000)], [S("log10", "y", x="x")], "y", "dimensionless"), 3.0),
    # ---------------------------------------------------------------- kinematics
    ("car", "A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go?",
     T([G("v0", 0, "m/s"), G("a", 2, "m/s^2"), G("t", 5, "s")],
       [S("kin_displacement", "d", "m", 25, v0="v0", a="a", t="t")], "d", "m"), 25.0),
    ("brake", "A car at 72 km/h brakes at 4 m/s^2. Stopping time?",
     T([G("v0", 72, "km/h"), G("v", 0, "m/s"), G("a", -4, "m/s^2")],
       [S("kin_time_from_velocities", "t", "s", v0="v0", v="v", a="a")], "t", "s"), 5.0),
    ("trip", "A train travels 180 km in 2 h 30 min. Average speed in km/h?",
     T([G("d", 180, "km"), G("h", 2, "hour"), G("m", 30, "minute")],
       [S("add", "t", "hour", 2.5, x="h", y="m"), S("average_speed", "v", "km/h", d="d", t="t")], "v", "km/h"), 72.0),
    ("fall", "A stone falls from rest for 3 s. Distance fallen?",
     T([G("t", 3, "s")], [S("const", "g", "m/s^2", name="g"), S("free_fall_distance", "d", "m", g="g", t="t")], "d",
       "m"), 0.5 * g0 * 9),
    ("projectile", "A ball is launched at 20 m/s at 45 degrees. Range?",
     T([G("v0", 20, "m/s"), G("th", 45, "degree")],
       [S("const", "g", "m/s^2", name="g"), S("projectile_range", "R", "m", v0="v0", theta="th", g="g")], "R", "m"),
     400 / g0),
    ("circle", "A runner on a 50 m radius track at 5 m/s: centripetal acceleration?",
     T([G("v", 5, "m/s"), G("r", 50, "m")], [S("centripetal_acceleration", "ac", "m/s^2", 0.5, v="v", r="r")], "ac",
       "m/s^2"), 0.5),
    # ---------------------------------------------------------------- dynamics
    ("force", "What force accelerates a 1500 g cart at 2 m/s^2?",
     T([G("m", 1500, "g"), G("a", 2, "m/s^2")], [S("newton_force", "F", "N", 3, m="m", a="a")], "F", "N"), 3.0),
    ("weight_friction", "A 10 kg box on a floor with mu = 0.3. Friction force?",
     T([G("m", 10, "kg"), G("mu", 0.3)],
       [S("const", "g", "m/s^2", name="g"), S("weight", "W", "N", m="m", g="g"),
        S("friction_force", "f", "N", mu="mu", n="W")], "f", "N"), 3 * g0),
    ("momentum", "A 0.15 kg ball at 40 m/s: momentum?",
     T([G("m", 150, "g"), G("v", 40, "m/s")], [S("momentum", "p", "kg*m/s", 6, m="m", v="v")], "p", "N*s"), 6.0),
    ("inelastic", "A 2 kg cart at 3 m/s hits a resting 1 kg cart and sticks. Speed after?",
     T([G("m1", 2, "kg"), G("v1", 3, "m/s"), G("m2", 1, "kg"), G("v2", 0, "m/s")],
       [S("perfectly_inelastic_velocity", "v", "m/s", 2, m1="m1", v1="v1", m2="m2", v2="v2")], "v", "m/s"), 2.0),
    ("spring", "A spring with k = 200 N/m stretched 5 cm: force?",
     T([G("k", 200, "N/m"), G("x", 5, "cm")], [S("spring_force", "F", "N", 10, k="k", x="x")], "F", "N"), 10.0),
    ("gravity", "Force between two 1000 kg masses 1 m apart?",
     T([G("m", 1000, "kg"), G("r", 1, "m")],
       [S("const", "G", "N*m^2/kg^2", name="G"), S("gravitational_force", "F", "N", G="G", m1="m", m2="m", r="r")],
       "F", "uN"), 6.6743e-11 * 1e6 * 1e6),
    # ---------------------------------------------------------------- energy
    ("ke", "Kinetic energy of a 2 kg ball at 3 m/s?",
     T([G("m", 2, "kg"), G("v", 3, "m/s")], [S("kinetic_energy", "K", "J", 9, m="m", v="v")], "K", "J"), 9.0),
    ("pe_speed", "A 3 kg block slides from 5 m height frictionlessly. Speed at the bottom?",
     T([G("m", 3, "kg"), G("h", 5, "m")],
       [S("const", "g", "m/s^2", name="g"), S("potential_energy", "U", "J", m="m", g="g", h="h"),
        S("speed_from_kinetic_energy", "v", "m/s", ke="U", m="m")], "v", "m/s"), math.sqrt(2 * g0 * 5)),
    ("power", "A motor does 6 kJ of work in 2 minutes. Power?",
     T([G("W", 6, "kJ"), G("t", 2, "minute")], [S("power", "P", "W", 50, w="W", t="t")], "P", "W"), 50.0),
    ("work", "A 20 N force pushes a box 3 m. Work?",
     T([G("F", 20, "N"), G("d", 3, "m")], [S("work", "W", "J", 60, f="F", d="d")], "W", "J"), 60.0),
    # ---------------------------------------------------------------- circuits
    ("ohm", "A 2 A current through 6 ohm: voltage?",
     T([G("I", 2, "A"), G("R", 6, "ohm")], [S("ohm_voltage", "V", "V", 12, i="I", r="R")], "V", "V"), 12.0),
    ("parallel", "3 ohm and 6 ohm in parallel across 12 V: current?",
     T([G("R1", 3, "ohm"), G("R2", 6, "ohm"), G("V", 12, "V")],
       [S("parallel_resistance", "R", "ohm", 2, x1="R1", x2="R2"), S("ohm_current", "I", "A", 6, v="V", r="R")],
       "I", "A"), 6.0),
    ("bulb_energy", "A 60 W bulb runs 5 hours. Energy in kWh?",
     T([G("P", 60, "W"), G("t", 5, "hour")], [S("energy_from_power", "E", "kWh", 0.3, p="P", t="t")], "E", "kWh"),
     0.3),
    ("capacitor", "A 10 uF capacitor at 100 V: energy?",
     T([G("C", 10, "uF"), G("V", 100, "V")], [S("capacitor_energy", "E", "J", 0.05, c="C", v="V")], "E", "mJ"), 50.0),
    # ---------------------------------------------------------------- thermodynamics
    ("heat", "Heat to warm 2 kg of water from 20 C to 30 C?",
     T([G("m", 2, "kg"), G("T1", 20, "degC"), G("T2", 30, "degC")],
       [S("const", "c", "J/(kg*K)", name="c_water"), S("sub", "dT", "K", 10, x="T2", y="T1"),
        S("heat", "Q", "J", m="m", c="c", delta_t="dT")], "Q", "kJ"), 83.72),
    ("ideal_gas", "2 mol of gas at 300 K in 0.05 m^3: pressure?",
     T([G("n", 2, "mol"), G("T", 300, "K"), G("V", 50, "L")],
       [S("const", "R", "J/(mol*K)", name="R"), S("ideal_gas_pressure", "p", "Pa", n="n", R="R", temp="T", vol="V")],
       "p", "kPa"), 2 * 8.314462618 * 300 / 0.05 / 1000),
    ("carnot", "Carnot efficiency between 300 K and 500 K?",
     T([G("Tc", 300, "K"), G("Th", 500, "K")], [S("carnot_efficiency", "eta", "percent", 40, t_cold="Tc", t_hot="Th")],
       "eta", "percent"), 40.0),
    # ---------------------------------------------------------------- waves and optics
    ("wave", "A 440 Hz sound in air at 343 m/s: wavelength?",
     T([G("f", 440, "Hz"), G("v", 343, "m/s")], [S("wavelength", "lam", "m", v="v", f="f")], "lam", "cm"),
     34300 / 440),
    ("lens", "An object 30 cm from a 10 cm focal lens: image distance?",
     T([G("f", 10, "cm"), G("do", 30, "cm")], [S("thin_lens_image_distance", "di", "cm", 15, focal="f", d_o="do")],
       "di", "cm"), 15.0),
    ("pendulum", "Period of a 1 m pendulum?",
     T([G("L", 1, "m")], [S("const", "g", "m/s^2", name="g"), S("pendulum_period", "T", "s", length="L", g="g")], "T",
       "s"), 2 * math.pi * math.sqrt(1 / g0)),
    ("photon", "Energy of a 500 nm photon in eV?",
     T([G("lam", 500, "nm")], [S("const", "h", "J*s", name="h"), S("const", "c", "m/s", name="c"),
                                S("photon_energy_wavelength", "E", "J", h="h", c="c", lam="lam")], "E", "eV"),
     6.62607015e-34 * 299792458.0 / 500e-9 / 1.602176634e-19),
]
