//! Line and bar charts drawn by flashmux itself: one SVG and one PNG per chart, with no system
//! fonts and no external tools.
//!
//! Charts are drawn with `plotters` (SVG and bitmap backends, its pure-Rust `ab_glyph` text
//! backend). Text needs a font to be measured (both formats) and rasterised (PNG); the font is
//! Noto Sans Regular from the `notosans` crate (SIL Open Font License 1.1), compiled into the
//! binary and registered once as `sans-serif`. The SVG names `sans-serif`, so viewers draw its
//! text with their own sans-serif font.
//!
//! A chart is a pure function of its [`LineChart`]: the same chart gives byte-identical files.
//!
//! - Each [`Series`] is one line with point markers, in its own colour, named in the legend;
//!   points are joined in the order given.
//! - Points with a non-finite coordinate (and, on a log-scale x axis, x ≤ 0) are skipped; a series
//!   with no drawable point still appears in the legend. A chart with no drawable point at all is
//!   an error ([`PlotError::NoData`]).
//! - Axes span the data with a small margin; the y axis starts at 0 when no value is negative.
//!   An explicit [`LineChart::y_range`] fixes the y axis; values outside it are drawn at its edge.
//! - With [`LineChart::log_x`] the x axis is logarithmic with ticks at powers of two (sweeps of
//!   cache and buffer sizes double from point to point).
//!
//! A [`BarChart`] groups bars by category along x (VMs, say), one bar per [`BarSeries`] in each
//! group, in the series' colour and named in the legend. A non-finite value draws no bar; a chart
//! with no finite value is an error. The y axis starts at 0 unless a value is negative.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle, RGBColor};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One line of a chart.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// Its name in the legend.
    pub label: String,
    /// (x, y) points, joined in this order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart: its text, its series and how its axes are scaled.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Fixed y axis (low, high); `None`: fitted to the data.
    pub y_range: Option<(f64, f64)>,
    /// Logarithmic x axis (base 2); points with x ≤ 0 are skipped.
    pub log_x: bool,
}

/// A grouped bar chart: for each category, one bar per series.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BarChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// The groups along the x axis, named under them.
    pub categories: Vec<String>,
    pub series: Vec<BarSeries>,
}

/// One bar in each category: `values[i]` is category i's (missing or non-finite: no bar).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BarSeries {
    pub label: String,
    pub values: Vec<f64>,
}

/// Width and height of the charts, in pixels (the SVG's user units).
pub const CHART_SIZE: (u32, u32) = (800, 500);

/// A chart that cannot be drawn or written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("chart '{title}': no data to plot: {reason}")]
    NoData { title: String, reason: String },
    #[error("chart '{title}': y_range ({low}, {high}) is not a finite range with low < high")]
    BadRange { title: String, low: f64, high: f64 },
    #[error("chart stem '{0}' is not a plain file name")]
    BadStem(String),
    #[error("the embedded chart font could not be loaded")]
    Font,
    #[error("drawing {path}: {message}")]
    Draw { path: String, message: String },
    #[error("writing {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The font family every chart's text uses, and under which the embedded font is registered.
const FONT_FAMILY: &str = "sans-serif";

/// Registers the embedded font with plotters, once per process (any thread may be first).
fn ensure_font() -> Result<(), PlotError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| register_font(FONT_FAMILY, FontStyle::Normal, notosans::REGULAR_TTF).is_ok());
    if ok {
        Ok(())
    } else {
        Err(PlotError::Font)
    }
}

/// A chart ready to draw on any backend.
trait Figure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

struct LineFigure<'a> {
    chart: &'a LineChart,
    layout: Layout,
}

impl Figure for LineFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        draw(self.chart, &self.layout, root)
    }
}

fn check_stem(stem: &str) -> Result<(), PlotError> {
    if stem.is_empty() || stem.contains(['/', '\\']) || stem == "." || stem == ".." {
        return Err(PlotError::BadStem(stem.to_string()));
    }
    Ok(())
}

/// Writes `<stem>.svg` and `<stem>.png` (both [`CHART_SIZE`]) into `dir`, creating `dir` if
/// needed, and returns their paths (SVG first).
pub fn write_line_chart(chart: &LineChart, dir: &Path, stem: &str) -> Result<Vec<PathBuf>, PlotError> {
    check_stem(stem)?;
    write_figure(&LineFigure { chart, layout: Layout::of(chart)? }, dir, stem)
}

/// Writes a bar chart as `<stem>.svg` and `<stem>.png`, as [`write_line_chart`] does.
pub fn write_bar_chart(chart: &BarChart, dir: &Path, stem: &str) -> Result<Vec<PathBuf>, PlotError> {
    check_stem(stem)?;
    write_figure(&BarFigure { chart, layout: BarLayout::of(chart)? }, dir, stem)
}

fn write_figure(fig: &impl Figure, dir: &Path, stem: &str) -> Result<Vec<PathBuf>, PlotError> {
    ensure_font()?;
    let svg_path = dir.join(format!("{stem}.svg"));
    let png_path = dir.join(format!("{stem}.png"));
    let svg = render_svg(fig).map_err(|message| PlotError::Draw { path: svg_path.display().to_string(), message })?;
    let png = render_png(fig).map_err(|message| PlotError::Draw { path: png_path.display().to_string(), message })?;
    std::fs::create_dir_all(dir).map_err(|source| PlotError::Io { path: dir.display().to_string(), source })?;
    for (path, bytes) in [(&svg_path, svg.as_bytes()), (&png_path, png.as_slice())] {
        crate::fsutil::write_atomic(path, |w| w.write_all(bytes))
            .map_err(|source| PlotError::Io { path: path.display().to_string(), source })?;
    }
    Ok(vec![svg_path, png_path])
}

/// The SVG document of a chart.
fn render_svg(fig: &impl Figure) -> Result<String, String> {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, CHART_SIZE).into_drawing_area();
        fig.draw(&root)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(text)
}

/// The PNG file of a chart (8-bit RGB).
fn render_png(fig: &impl Figure) -> Result<Vec<u8>, String> {
    let (w, h) = CHART_SIZE;
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, CHART_SIZE).into_drawing_area();
        fig.draw(&root)?;
        root.present().map_err(|e| e.to_string())?;
    }
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().map_err(|e| e.to_string())?;
    writer.write_image_data(&rgb).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    Ok(out)
}

/// Colours of the first ten series (Tableau 10, readable on white); later ones are spread
/// around the colour wheel.
const PALETTE: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

fn series_color(i: usize) -> RGBAColor {
    match PALETTE.get(i) {
        Some(&(r, g, b)) => RGBColor(r, g, b).to_rgba(),
        None => HSLColor((i as f64 * 0.618_033_988_75).fract(), 0.65, 0.42).to_rgba(),
    }
}

/// Everything about a chart's geometry, computed from the data once for both formats.
struct Layout {
    /// Drawable points per series, x already on the axis' scale (log2 x for log charts).
    points: Vec<Vec<(f64, f64)>>,
    x_range: (f64, f64),
    y_range: (f64, f64),
    /// Tick positions (axis scale) and their labels.
    x_ticks: Vec<(f64, String)>,
    y_ticks: Vec<(f64, String)>,
    legend: SeriesLabelPosition,
    /// Pixels left of the plot for the y tick labels and the y axis label.
    y_label_area: u32,
}

impl Layout {
    fn of(chart: &LineChart) -> Result<Layout, PlotError> {
        let no_data = |reason: &str| PlotError::NoData { title: chart.title.clone(), reason: reason.to_string() };
        let fixed_y = match chart.y_range {
            Some((low, high)) if low.is_finite() && high.is_finite() && low < high => Some((low, high)),
            Some((low, high)) => return Err(PlotError::BadRange { title: chart.title.clone(), low, high }),
            None => None,
        };
        let points: Vec<Vec<(f64, f64)>> = chart
            .series
            .iter()
            .map(|s| {
                s.points
                    .iter()
                    .filter(|(x, y)| x.is_finite() && y.is_finite() && (!chart.log_x || *x > 0.0))
                    .map(|&(x, y)| {
                        let x = if chart.log_x { x.log2() } else { x };
                        let y = match fixed_y {
                            Some((lo, hi)) => y.clamp(lo, hi),
                            None => y,
                        };
                        (x, y)
                    })
                    .collect()
            })
            .collect();
        let all = || points.iter().flatten();
        if chart.series.is_empty() {
            return Err(no_data("the chart has no series"));
        }
        if all().next().is_none() {
            return Err(no_data(if chart.log_x {
                "no series has a point with finite coordinates and x > 0 (the x axis is logarithmic)"
            } else {
                "no series has a point with finite coordinates"
            }));
        }
        let (x_min, x_max) = min_max(all().map(|p| p.0));
        let (y_min, y_max) = min_max(all().map(|p| p.1));

        let x_range = if x_max > x_min {
            let pad = (x_max - x_min) * if chart.log_x { 0.05 } else { 0.03 };
            (x_min - pad, x_max + pad)
        } else if chart.log_x {
            (x_min - 0.5, x_max + 0.5)
        } else {
            let pad = if x_min == 0.0 { 1.0 } else { x_min.abs() * 0.1 };
            (x_min - pad, x_max + pad)
        };
        let y_range = match fixed_y {
            Some(r) => r,
            None => {
                let low = if y_min >= 0.0 { 0.0 } else { y_min - (y_max - y_min) * 0.05 };
                let high = y_max + (y_max - low) * 0.05;
                if high > low {
                    (low, high)
                } else if low == 0.0 {
                    (0.0, 1.0)
                } else {
                    // All values equal and negative.
                    (low - low.abs() * 0.1, high + low.abs() * 0.1)
                }
            }
        };
        let x_ticks = if chart.log_x { log2_ticks(x_range, 10) } else { labelled(nice_ticks(x_range, 10)) };
        let y_ticks = labelled(nice_ticks(y_range, 8));
        Ok(Layout {
            legend: legend_corner(&points, x_range, y_range),
            points,
            x_range,
            y_range,
            x_ticks,
            y_label_area: y_label_area(&y_ticks),
            y_ticks,
        })
    }
}

fn min_max(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// Round tick values (1, 2, 2.5 or 5 × 10ⁿ apart) inside `range`, at most about `max` of them,
/// each with the step it was made with.
fn nice_ticks((low, high): (f64, f64), max: usize) -> (Vec<f64>, f64) {
    let raw = (high - low) / max.max(1) as f64;
    if !(raw > 0.0 && raw.is_finite()) {
        return (vec![low], 1.0);
    }
    let mag = 10f64.powf(raw.log10().floor());
    let step =
        [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw * (1.0 - 1e-9)).unwrap_or(10.0 * mag);
    let first = (low / step - 1e-9).ceil() as i64;
    let last = (high / step + 1e-9).floor() as i64;
    // Multiples of the step, not a running sum: no accumulated rounding.
    ((first..=last).map(|k| k as f64 * step).collect(), step)
}

/// Ticks labelled with as many decimals as their step needs.
fn labelled((ticks, step): (Vec<f64>, f64)) -> Vec<(f64, String)> {
    let big = ticks.iter().any(|t| t.abs() >= 1e9);
    let decimals = if step >= 1.0 { 0 } else { (-step.log10()).ceil() as usize + usize::from(step_is_quarter(step)) };
    ticks.into_iter().map(|t| (t, if big { format!("{t:.3e}") } else { format!("{:.*}", decimals, t + 0.0) })).collect()
}

/// A step like 0.25 or 0.025 needs one decimal more than its magnitude.
fn step_is_quarter(step: f64) -> bool {
    let mag = 10f64.powf(step.log10().floor());
    ((step / mag) - 2.5).abs() < 1e-9
}

/// Ticks of a log2 axis (`range` in log2 units): powers of two, thinned to at most `max`; when
/// the range holds fewer than two powers of two, round values of the linear scale instead.
/// Labels are the values themselves.
fn log2_ticks((low, high): (f64, f64), max: usize) -> Vec<(f64, String)> {
    let first = low.ceil() as i64;
    let last = high.floor() as i64;
    if last > first {
        let count = (last - first + 1) as usize;
        let every = count.div_ceil(max.max(1)) as i64;
        return (first..=last)
            .filter(|k| (k - first) % every == 0)
            .map(|k| (k as f64, format_value(2f64.powi(k as i32))))
            .collect();
    }
    let (lin, step) = nice_ticks((low.exp2(), high.exp2()), 5);
    labelled((lin.into_iter().filter(|v| *v > 0.0).collect(), step))
        .into_iter()
        .map(|(v, label)| (v.log2(), label))
        .collect()
}

/// A tick value: whole numbers in full (up to 10⁹), fractions with up to four significant
/// decimals, very large or small values in scientific notation.
fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e9 {
        format!("{v:.0}")
    } else if v.abs() >= 1e9 || v.abs() < 1e-3 {
        format!("{v:.3e}")
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The plot corner whose quarter holds the fewest points, for the legend (ties: upper right,
/// upper left, lower right, lower left).
fn legend_corner(points: &[Vec<(f64, f64)>], x: (f64, f64), y: (f64, f64)) -> SeriesLabelPosition {
    let fx = |v: f64| (v - x.0) / (x.1 - x.0);
    let fy = |v: f64| (v - y.0) / (y.1 - y.0);
    let corners = [
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::LowerRight, true, false),
        (SeriesLabelPosition::LowerLeft, false, false),
    ];
    let count = |right: bool, upper: bool| {
        points
            .iter()
            .flatten()
            .filter(|&&(px, py)| {
                let (a, b) = (fx(px), fy(py));
                (if right { a >= 0.55 } else { a <= 0.45 }) && (if upper { b >= 0.55 } else { b <= 0.45 })
            })
            .count()
    };
    let mut best = (SeriesLabelPosition::UpperRight, usize::MAX);
    for (pos, right, upper) in corners {
        let n = count(right, upper);
        if n < best.1 {
            best = (pos, n);
        }
    }
    best.0
}

/// A linear f64 axis with ticks (and grid lines) exactly where [`Layout`] put them.
struct TickedAxis {
    linear: RangedCoordf64,
    ticks: Vec<f64>,
}

impl TickedAxis {
    fn new((low, high): (f64, f64), ticks: Vec<f64>) -> TickedAxis {
        TickedAxis { linear: (low..high).into(), ticks }
    }
}

impl Ranged for TickedAxis {
    // Labels come from the mesh's label formatters.
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Bold points only: no light grid lines between the ticks.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.linear.range()
    }
}

/// Pixels left of the plot for the y tick labels and the y axis label.
fn y_label_area(y_ticks: &[(f64, String)]) -> u32 {
    let widest = y_ticks.iter().map(|(_, l)| l.chars().count()).max().unwrap_or(1) as u32;
    (widest * 8 + 40).clamp(60, 160)
}

/// The label of the tick at `v`, or `v` itself formatted.
fn tick_label(ticks: &[(f64, String)], v: f64) -> String {
    ticks.iter().find(|t| t.0 == v).map_or_else(|| format_value(v), |t| t.1.clone())
}

type Plot<'a, DB> = ChartContext<'a, DB, Cartesian2d<TickedAxis, TickedAxis>>;

/// What every chart's frame needs: its text, its axes and their tick labels.
struct Frame<'f> {
    title: &'f str,
    x_label: &'f str,
    y_label: &'f str,
    x: TickedAxis,
    y: TickedAxis,
    y_label_area: u32,
    x_fmt: &'f dyn Fn(&f64) -> String,
    y_fmt: &'f dyn Fn(&f64) -> String,
    /// Vertical grid lines at the x ticks (bar charts have none).
    x_grid: bool,
}

/// A white canvas with the title, the axes, their labels and grid lines: the chart area to draw
/// the series on.
fn frame<'a, DB: DrawingBackend>(root: &'a DrawingArea<DB, Shift>, f: Frame<'_>) -> Result<Plot<'a, DB>, String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut ctx = ChartBuilder::on(root)
        .caption(f.title, (FONT_FAMILY, 24))
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(f.y_label_area)
        .build_cartesian_2d(f.x, f.y)
        .map_err(|e| e.to_string())?;
    let mut mesh = ctx.configure_mesh();
    mesh.x_desc(f.x_label)
        .y_desc(f.y_label)
        .x_label_formatter(f.x_fmt)
        .y_label_formatter(f.y_fmt)
        .label_style((FONT_FAMILY, 15))
        .axis_desc_style((FONT_FAMILY, 17))
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(TRANSPARENT);
    if !f.x_grid {
        mesh.disable_x_mesh();
    }
    mesh.draw().map_err(|e| e.to_string())?;
    Ok(ctx)
}

/// The legend of the series drawn, in a framed box at `position`.
fn legend<'a, DB: DrawingBackend + 'a>(ctx: &mut Plot<'a, DB>, position: SeriesLabelPosition) -> Result<(), String> {
    ctx.configure_series_labels()
        .position(position)
        .label_font((FONT_FAMILY, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(|e| e.to_string())
}

/// Draws the chart on any backend.
fn draw<DB: DrawingBackend>(chart: &LineChart, layout: &Layout, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let x_keys: Vec<f64> = layout.x_ticks.iter().map(|t| t.0).collect();
    let y_keys: Vec<f64> = layout.y_ticks.iter().map(|t| t.0).collect();
    let x_fmt = |v: &f64| tick_label(&layout.x_ticks, *v);
    let y_fmt = |v: &f64| tick_label(&layout.y_ticks, *v);
    let mut ctx = frame(
        root,
        Frame {
            title: &chart.title,
            x_label: &chart.x_label,
            y_label: &chart.y_label,
            x: TickedAxis::new(layout.x_range, x_keys),
            y: TickedAxis::new(layout.y_range, y_keys),
            y_label_area: layout.y_label_area,
            x_fmt: &x_fmt,
            y_fmt: &y_fmt,
            x_grid: true,
        },
    )?;
    for (i, (series, points)) in chart.series.iter().zip(&layout.points).enumerate() {
        let color = series_color(i);
        let style = ShapeStyle { color, filled: true, stroke_width: 2 };
        ctx.draw_series(LineSeries::new(points.iter().copied(), style).point_size(3))
            .map_err(err)?
            .label(series.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    legend(&mut ctx, layout.legend.clone())
}

/// A bar chart's geometry: category i spans x in [i, i + 1].
struct BarLayout {
    y_range: (f64, f64),
    y_ticks: Vec<(f64, String)>,
    y_label_area: u32,
}

impl BarLayout {
    fn of(chart: &BarChart) -> Result<BarLayout, PlotError> {
        let no_data = |reason: &str| PlotError::NoData { title: chart.title.clone(), reason: reason.to_string() };
        if chart.categories.is_empty() {
            return Err(no_data("the chart has no categories"));
        }
        if chart.series.is_empty() {
            return Err(no_data("the chart has no series"));
        }
        let n = chart.categories.len();
        let values = || chart.series.iter().flat_map(|s| s.values.iter().take(n)).copied().filter(|v| v.is_finite());
        if values().next().is_none() {
            return Err(no_data("no series has a finite value"));
        }
        let (lo, hi) = min_max(values().chain([0.0]));
        let pad = (hi - lo) * 0.08;
        let y_range = if hi > lo { (if lo < 0.0 { lo - pad } else { 0.0 }, if hi > 0.0 { hi + pad } else { 0.0 }) } else { (0.0, 1.0) };
        let y_ticks = labelled(nice_ticks(y_range, 8));
        Ok(BarLayout { y_label_area: y_label_area(&y_ticks), y_range, y_ticks })
    }
}

struct BarFigure<'a> {
    chart: &'a BarChart,
    layout: BarLayout,
}

impl Figure for BarFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let (chart, layout) = (self.chart, &self.layout);
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        let n = chart.categories.len();
        let centers: Vec<f64> = (0..n).map(|i| i as f64 + 0.5).collect();
        let y_keys: Vec<f64> = layout.y_ticks.iter().map(|t| t.0).collect();
        let x_fmt = |v: &f64| chart.categories.get(v.floor() as usize).cloned().unwrap_or_default();
        let y_fmt = |v: &f64| tick_label(&layout.y_ticks, *v);
        let mut ctx = frame(
            root,
            Frame {
                title: &chart.title,
                x_label: &chart.x_label,
                y_label: &chart.y_label,
                x: TickedAxis::new((0.0, n as f64), centers),
                y: TickedAxis::new(layout.y_range, y_keys),
                y_label_area: layout.y_label_area,
                x_fmt: &x_fmt,
                y_fmt: &y_fmt,
                x_grid: false,
            },
        )?;
        // Each group fills 80% of its category; its bars share that width.
        let width = 0.8 / chart.series.len() as f64;
        for (j, series) in chart.series.iter().enumerate() {
            let color = series_color(j);
            let bars = series.values.iter().take(n).enumerate().filter(|(_, v)| v.is_finite()).map(move |(i, &v)| {
                let x0 = i as f64 + 0.1 + j as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.92, v)], color.filled())
            });
            ctx.draw_series(bars)
                .map_err(err)?
                .label(series.label.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
        }
        legend(&mut ctx, SeriesLabelPosition::UpperRight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("flashmux-plot-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn chart() -> LineChart {
        LineChart {
            title: "Throughput vs cache size".into(),
            x_label: "CMT size (bytes)".into(),
            y_label: "IOPS".into(),
            series: vec![
                Series {
                    label: "shared".into(),
                    points: vec![(65536.0, 1000.0), (131072.0, 1800.0), (262144.0, 2500.0), (524288.0, 2600.0)],
                },
                Series {
                    label: "partitioned".into(),
                    points: vec![(65536.0, 1200.0), (131072.0, f64::NAN), (262144.0, 2100.0), (524288.0, 2900.0)],
                },
                Series { label: "empty one".into(), points: vec![] },
            ],
            y_range: None,
            log_x: true,
        }
    }

    /// Width and height from a PNG's IHDR chunk, after checking the signature.
    fn png_size(bytes: &[u8]) -> (u32, u32) {
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "PNG signature");
        assert_eq!(&bytes[12..16], b"IHDR");
        let be = |r: std::ops::Range<usize>| u32::from_be_bytes(bytes[r].try_into().unwrap_or([0; 4]));
        (be(16..20), be(20..24))
    }

    #[test]
    fn writes_svg_and_png_with_title_and_labels() {
        let dir = tmpdir("files");
        let paths = write_line_chart(&chart(), &dir, "iops").unwrap();
        assert_eq!(paths, vec![dir.join("iops.svg"), dir.join("iops.png")]);
        let svg = std::fs::read_to_string(&paths[0]).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
        for text in ["Throughput vs cache size", "CMT size (bytes)", "IOPS", "shared", "partitioned", "empty one"] {
            assert!(svg.contains(&format!(">\n{text}\n</text>")), "SVG lacks text '{text}'");
        }
        // Log-x ticks at the powers of two.
        for tick in ["65536", "131072", "262144", "524288"] {
            assert!(svg.contains(&format!(">\n{tick}\n</text>")), "SVG lacks tick '{tick}'");
        }
        let png = std::fs::read(&paths[1]).unwrap();
        assert_eq!(png_size(&png), CHART_SIZE);
        // The text is rasterised: the title's band has dark pixels.
        let dec = png::Decoder::new(std::io::Cursor::new(&png));
        let mut reader = dec.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        reader.next_frame(&mut buf).unwrap();
        let w = CHART_SIZE.0 as usize;
        let dark = buf[..w * 3 * 45].chunks(3).filter(|p| p.iter().all(|&c| c < 100)).count();
        assert!(dark > 100, "title band has {dark} dark pixels");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn output_is_deterministic() {
        let (a, b) = (tmpdir("det-a"), tmpdir("det-b"));
        let pa = write_line_chart(&chart(), &a, "c").unwrap();
        let pb = write_line_chart(&chart(), &b, "c").unwrap();
        for (x, y) in pa.iter().zip(&pb) {
            assert_eq!(std::fs::read(x).unwrap(), std::fs::read(y).unwrap(), "{}", x.display());
        }
        let _ = std::fs::remove_dir_all(&a);
        let _ = std::fs::remove_dir_all(&b);
    }

    #[test]
    fn linear_chart_with_fixed_range_and_negative_values() {
        let dir = tmpdir("linear");
        let mut c = chart();
        c.log_x = false;
        c.series[0].points.push((600000.0, -50.0));
        let paths = write_line_chart(&c, &dir, "lin").unwrap();
        assert!(paths.iter().all(|p| p.exists()));
        c.y_range = Some((0.0, 1.0));
        assert!(write_line_chart(&c, &dir, "fixed").is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_finite_points_is_an_error() {
        let dir = tmpdir("nodata");
        let mut c = chart();
        c.series = vec![
            Series { label: "nan".into(), points: vec![(f64::NAN, 1.0), (1.0, f64::INFINITY)] },
            Series { label: "none".into(), points: vec![] },
        ];
        let e = write_line_chart(&c, &dir, "x").unwrap_err();
        assert!(matches!(e, PlotError::NoData { .. }));
        assert!(e.to_string().contains("Throughput vs cache size"), "{e}");
        // On a log axis, x ≤ 0 is not drawable either.
        c.series = vec![Series { label: "zero".into(), points: vec![(0.0, 1.0), (-2.0, 3.0)] }];
        assert!(write_line_chart(&c, &dir, "x").unwrap_err().to_string().contains("logarithmic"));
        c.series.clear();
        assert!(matches!(write_line_chart(&c, &dir, "x"), Err(PlotError::NoData { .. })));
        let mut c = chart();
        c.y_range = Some((1.0, 1.0));
        assert!(matches!(write_line_chart(&c, &dir, "x"), Err(PlotError::BadRange { .. })));
        c.y_range = None;
        assert!(matches!(write_line_chart(&c, &dir, "a/b"), Err(PlotError::BadStem(_))));
        assert!(!dir.exists(), "nothing written for a rejected chart");
    }

    #[test]
    fn single_point_and_constant_values_still_draw() {
        let dir = tmpdir("single");
        for log_x in [false, true] {
            let c = LineChart {
                title: "one".into(),
                series: vec![Series { label: "s".into(), points: vec![(3.0, 0.0)] }],
                log_x,
                ..LineChart::default()
            };
            assert_eq!(write_line_chart(&c, &dir, "one").unwrap().len(), 2);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn ticks_are_round_and_labelled() {
        let (t, step) = nice_ticks((0.0, 2600.0), 8);
        assert_eq!(step, 500.0);
        assert_eq!(t, vec![0.0, 500.0, 1000.0, 1500.0, 2000.0, 2500.0]);
        let l = labelled(nice_ticks((0.0, 1.0), 4));
        assert_eq!(l.iter().map(|x| x.1.as_str()).collect::<Vec<_>>(), ["0.00", "0.25", "0.50", "0.75", "1.00"]);
        let l = log2_ticks((15.8, 20.2), 10);
        assert_eq!(
            l.iter().map(|x| x.1.as_str()).collect::<Vec<_>>(),
            ["65536", "131072", "262144", "524288", "1048576"]
        );
        // 30 powers of two, thinned to every third.
        assert_eq!(log2_ticks((0.0, 29.0), 10).len(), 10);
        // Less than one octave: round linear values.
        let l = log2_ticks((3.0f64.log2(), 3.5f64.log2()), 10);
        assert!(l.len() >= 2, "{l:?}");
        assert_eq!(format_value(0.5), "0.5");
        assert_eq!(format_value(1024.0), "1024");
    }

    fn bars() -> BarChart {
        BarChart {
            title: "Shares per VM".into(),
            x_label: "VM".into(),
            y_label: "share (%)".into(),
            categories: vec!["vm1".into(), "vm2".into(), "vm3".into()],
            series: vec![
                BarSeries { label: "ideal".into(), values: vec![50.0, 30.0, 20.0] },
                BarSeries { label: "CFQ".into(), values: vec![40.0, f64::NAN, 25.0] },
            ],
        }
    }

    #[test]
    fn bar_chart_writes_both_files_with_categories_and_legend() {
        let dir = tmpdir("bars");
        let paths = write_bar_chart(&bars(), &dir, "shares").unwrap();
        assert_eq!(paths, vec![dir.join("shares.svg"), dir.join("shares.png")]);
        let svg = std::fs::read_to_string(&paths[0]).unwrap();
        for text in ["Shares per VM", "VM", "share (%)", "vm1", "vm2", "vm3", "ideal", "CFQ"] {
            assert!(svg.contains(&format!(">\n{text}\n</text>")), "SVG lacks text '{text}'");
        }
        // Five bars (the NaN draws none) and two legend swatches, in the two series' colours.
        let (c0, c1) = ("fill=\"#1F77B4\"", "fill=\"#FF7F0E\"");
        assert_eq!((svg.matches(c0).count(), svg.matches(c1).count()), (4, 3), "{svg}");
        assert_eq!(png_size(&std::fs::read(&paths[1]).unwrap()), CHART_SIZE);
        let again = tmpdir("bars-again");
        let p2 = write_bar_chart(&bars(), &again, "shares").unwrap();
        for (x, y) in paths.iter().zip(&p2) {
            assert_eq!(std::fs::read(x).unwrap(), std::fs::read(y).unwrap(), "deterministic");
        }
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&again);
    }

    #[test]
    fn bar_chart_without_values_is_an_error() {
        let dir = tmpdir("bars-empty");
        let mut c = bars();
        c.series.iter_mut().for_each(|s| s.values = vec![f64::NAN]);
        assert!(matches!(write_bar_chart(&c, &dir, "x"), Err(PlotError::NoData { .. })));
        let c = BarChart { categories: vec![], ..bars() };
        assert!(write_bar_chart(&c, &dir, "x").unwrap_err().to_string().contains("no categories"));
        assert!(matches!(write_bar_chart(&bars(), &dir, ".."), Err(PlotError::BadStem(_))));
        assert!(!dir.exists());
        // Negative values draw below a zero line.
        let mut c = bars();
        c.series[1].values[0] = -10.0;
        assert!(write_bar_chart(&c, &dir, "neg").is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn font_registration_is_idempotent_across_threads() {
        let handles: Vec<_> = (0..4).map(|_| std::thread::spawn(ensure_font)).collect();
        for h in handles {
            assert!(h.join().is_ok_and(|r| r.is_ok()));
        }
        assert!(ensure_font().is_ok());
    }
}
