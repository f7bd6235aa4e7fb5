//! LOLWUT [VERSION v] [args…]: Redis's computer art and version line.
//!
//! As Redis 7.0 does: without VERSION (or with a version other than 5 or
//! 6) the reply is `Redis ver. 7.0.15` (7.0 has no art of its own);
//! VERSION 5 draws Georg Nees's "Schotter" in braille characters (columns,
//! squares per row, squares per column), VERSION 6 a skyline in terminal
//! colour escapes (columns, rows). The drawing code follows Redis's,
//! including its float arithmetic, so everything not random matches byte
//! for byte; Redis draws its random parts with libc's `rand()`, hozon
//! with its own generator (the tilted squares below the second row of
//! version 5, the buildings of version 6).

use super::{parse_int, CmdResult, CommandSpec, Ctx};
use crate::reply::Reply;

/// The LOLWUT table (arity and flags from the generated metadata).
pub static COMMANDS: &[CommandSpec] =
    &[CommandSpec::from_docs("lolwut", "lolwut", "server", lolwut)];

/// The version line every variant ends with.
fn version_line() -> String {
    format!("Redis ver. {}\n", super::server::REDIS_VERSION)
}

fn lolwut(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut args = &argv[1..];
    let mut version = None;
    if argv.len() >= 3 && argv[1].eq_ignore_ascii_case(b"version") {
        // Redis prints the number with "%u.0.0" of its unsigned int cast
        // and looks at the first characters.
        version = Some(parse_int(argv[2])? as u32);
        args = &argv[3..];
    }
    let mut rng = crate::rand::Rng::new();
    let text = match version {
        Some(5) => schotter(args, &mut rng)?,
        Some(6) => skyline(args, &mut rng)?,
        _ => version_line(),
    };
    Ok(Reply::Verbatim(*b"txt", text.into_bytes()))
}

/// An optional numeric argument (Redis's `getLongFromObjectOrReply`).
fn arg_or(args: &[&[u8]], i: usize, default: i64) -> Result<i64, Reply> {
    match args.get(i) {
        Some(a) => parse_int(a),
        None => Ok(default),
    }
}

/// libc's `rand()` stand-in: a value in 0..=RAND_MAX.
fn rand(rng: &mut crate::rand::Rng) -> i32 {
    (rng.next_u64() >> 33) as i32
}

const RAND_MAX: i32 = i32::MAX;

/// A canvas of colour indexes (Redis's `lwCanvas`).
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, color: u8) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![color; (width as usize) * (height as usize)],
        }
    }

    fn draw(&mut self, x: i32, y: i32, color: u8) {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return;
        }
        self.pixels[(x + y * self.width) as usize] = color;
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return 0;
        }
        self.pixels[(x + y * self.width) as usize]
    }

    /// Bresenham's line, as `lwDrawLine`.
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32, color: u8) {
        let dx = (x2 - x1).abs();
        let dy = (y2 - y1).abs();
        let sx = if x1 < x2 { 1 } else { -1 };
        let sy = if y1 < y2 { 1 } else { -1 };
        let mut err = dx - dy;
        loop {
            self.draw(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// `lwDrawSquare`: C's float and double steps kept as they are.
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32, color: u8) {
        // Redis's literal, not SQRT_2: the last digits change roundings.
        #[allow(clippy::approx_constant)]
        let size = (f64::from(size) / 1.4142135623) as f32;
        let size = f64::from(size).round() as f32;
        let mut k = (std::f64::consts::PI / 4.0 + f64::from(angle)) as f32;
        let mut px = [0i32; 4];
        let mut py = [0i32; 4];
        for j in 0..4 {
            px[j] = (f64::from(k).sin() * f64::from(size) + f64::from(x)).round() as i32;
            py[j] = (f64::from(k).cos() * f64::from(size) + f64::from(y)).round() as i32;
            k = (f64::from(k) + std::f64::consts::PI / 2.0) as f32;
        }
        for j in 0..4 {
            self.line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4], color);
        }
    }
}

/// LOLWUT VERSION 5 (Redis's `lolwut5Command`).
fn schotter(args: &[&[u8]], rng: &mut crate::rand::Rng) -> Result<String, Reply> {
    let cols = arg_or(args, 0, 66)?.clamp(1, 1000) as i32;
    let per_row = arg_or(args, 1, 8)?.clamp(1, 200) as i32;
    let per_col = arg_or(args, 2, 12)?.clamp(1, 200) as i32;
    let canvas = draw_schotter(cols, per_row, per_col, rng);
    let mut text = String::new();
    let mut y = 0;
    while y < canvas.height {
        let mut x = 0;
        while x < canvas.width {
            let bits = [
                (x, y),
                (x, y + 1),
                (x, y + 2),
                (x + 1, y),
                (x + 1, y + 1),
                (x + 1, y + 2),
                (x, y + 3),
                (x + 1, y + 3),
            ];
            let mut byte = 0u32;
            for (i, (px, py)) in bits.into_iter().enumerate() {
                if canvas.get(px, py) != 0 {
                    byte |= 1 << i;
                }
            }
            text.push(char::from_u32(0x2800 + byte).expect("braille"));
            x += 2;
        }
        if y != canvas.height - 1 {
            text.push('\n');
        }
        y += 4;
    }
    text.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. ");
    text.push_str(&version_line());
    Ok(text)
}

/// `lwDrawSchotter`.
fn draw_schotter(cols: i32, per_row: i32, per_col: i32, rng: &mut crate::rand::Rng) -> Canvas {
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32 + (padding * 2) as f32) as i32;
    let mut canvas = Canvas::new(width, height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle = 0f32;
            if y > 1 {
                let mut r = || rand(rng) as f32 / RAND_MAX as f32 / per_col as f32 * y as f32;
                let (mut r1, mut r2, mut r3) = (r(), r(), r());
                if rand(rng) % 2 != 0 {
                    r1 = -r1;
                }
                if rand(rng) % 2 != 0 {
                    r2 = -r2;
                }
                if rand(rng) % 2 != 0 {
                    r3 = -r3;
                }
                angle = r1;
                sx = (sx as f32 + r2 * side / 3.0) as i32;
                sy = (sy as f32 + r3 * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle, 1);
        }
    }
    canvas
}

/// LOLWUT VERSION 6 (Redis's `lolwut6Command`).
fn skyline(args: &[&[u8]], rng: &mut crate::rand::Rng) -> Result<String, Reply> {
    let cols = arg_or(args, 0, 80)?.clamp(1, 1000) as i32;
    let rows = arg_or(args, 1, 20)?.clamp(1, 1000) as i32;
    let mut canvas = Canvas::new(cols, rows, 3);
    draw_skyline(&mut canvas, rng);
    let mut text = String::new();
    for y in 0..canvas.height {
        for x in 0..canvas.width {
            let escape = match canvas.get(x, y) {
                1 => "0;90;100m",
                2 => "0;37;47m",
                3 => "0;97;107m",
                _ => "0;30;40m",
            };
            text.push_str("\x1b[");
            text.push_str(escape);
            text.push_str(" \x1b[0m");
        }
        if y != canvas.height - 1 {
            text.push('\n');
        }
    }
    text.push_str(
        "\nDedicated to the 8 bit game developers of past and present.\n\
         Original 8 bit image from Plaguemon by hikikomori. ",
    );
    text.push_str(&version_line());
    Ok(text)
}

/// One building (`struct skyscraper`).
struct Skyscraper {
    xoff: i32,
    width: i32,
    height: i32,
    windows: bool,
    color: u8,
}

/// `generateSkyscraper`.
fn draw_skyscraper(canvas: &mut Canvas, s: &Skyscraper, rng: &mut crate::rand::Rng) {
    let starty = canvas.height - 1;
    let endy = starty - s.height + 1;
    let mut y = starty;
    while y >= endy {
        for x in s.xoff..s.xoff + s.width {
            if y == endy && (x <= s.xoff + 1 || x >= s.xoff + s.width - 2) {
                continue;
            }
            let mut color = s.color;
            if s.windows
                && x > s.xoff + 1
                && x < s.xoff + s.width - 2
                && y > endy + 1
                && y < starty - 1
            {
                let relx = x - (s.xoff + 1);
                let rely = y - (endy + 1);
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    loop {
                        color = 1 + (rand(rng) % 2) as u8;
                        if color != s.color {
                            break;
                        }
                    }
                    if relx % 2 != 0 {
                        color = canvas.get(x - 1, y);
                    }
                }
            }
            canvas.draw(x, y, color);
        }
        y -= 1;
    }
}

/// `generateSkyline`.
fn draw_skyline(canvas: &mut Canvas, rng: &mut crate::rand::Rng) {
    let (width, height) = (canvas.width, canvas.height);
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < width {
            offset += rand(rng) % 8;
            let building_width = 10 + rand(rng) % 9;
            let building_height = if color == 2 {
                height / 2 + (rand(rng) % height) / 2
            } else {
                height / 2 + (rand(rng) % height) / 3
            };
            let s = Skyscraper {
                xoff: offset,
                width: building_width,
                height: building_height,
                windows: false,
                color,
            };
            draw_skyscraper(canvas, &s, rng);
            offset += if color == 2 {
                building_width / 2
            } else {
                building_width + 1
            };
        }
    }
    let mut offset = -10;
    while offset < width {
        offset += rand(rng) % 8;
        let mut building_width = 5 + rand(rng) % 14;
        if building_width % 4 != 0 {
            building_width += building_width % 3;
        }
        let s = Skyscraper {
            xoff: offset,
            width: building_width,
            height: height / 3 + (rand(rng) % height) / 2,
            windows: true,
            color: 0,
        };
        draw_skyscraper(canvas, &s, rng);
        offset += building_width + 5;
    }
}
